"""The nemeth-mixture experiment end to end at a tiny budget (slow), checked on the data it
returns: Table 1's rows beside the published ones, the sd scaled to the paper's run length,
Figures 3 and 4."""

import numpy as np
import pytest

from gradmc.experiments import nemeth


@pytest.mark.slow  # compiles RAM, EE, PT, NUTS and PE-NUTS: ~30 s
def test_mixture_end_to_end(tmp_path):
    result = nemeth.mixture_experiment(
        out=tmp_path, full=False, seed=0, progress=False, scenarios=("a",), ns=(2,), budget=nemeth.Budget(2, 30, 60)
    )
    rows = {row["method"]: row for row in result["tables"]["a"]}
    assert list(rows) == ["Truth", "RAM", "EE", "PT", "HMC", "PE (N=2)"]
    assert rows["RAM"]["E[x1] paper"] == "4.471 (0.091)" and rows["Truth"]["E[x1] paper"] == "4.478"
    assert result["estimates"]["a"]["RAM"].shape == (2, 4)
    assert all(
        np.isfinite(rows[m]["sd@50k / paper"]) and rows[m]["MSE"] >= 0 for m in ("RAM", "EE", "PT", "HMC", "PE (N=2)")
    )
    assert set(result["mse_ct"]["a"]) == {2}
    assert (tmp_path / "figure3_a.png").exists() and (tmp_path / "figure4.png").exists()
