"""The README's and the getting-started page's Python examples run, with no run warning at
their budgets; the main job's command is the one the docs show."""

import re
import warnings
from pathlib import Path

import pytest

import gradmc

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", README, flags=re.S)
#: The examples that run here: the quick start, your own model, a mixed model and a kernel
#: used alone (the others run DISCS's 25×25 Ising model, PCD and a 10,000-chain run).
RUN_HERE = 4


GETTING_STARTED = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "getting-started.md").read_text(), flags=re.S)


def _run_clean(examples, where: str) -> dict:
    namespace = {"__name__": "docs_example"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", gradmc.RunWarning)
        for index, code in enumerate(examples):
            exec(compile(code, f"{where} example {index + 1}", "exec"), namespace)
    return namespace


@pytest.mark.slow
def test_readme_examples_run_clean():
    assert "from gradmc.continuous import mala" in EXAMPLES[RUN_HERE - 1]
    assert _run_clean(EXAMPLES[:RUN_HERE], "README.md")["trace"].warnings == []


@pytest.mark.slow
def test_getting_started_examples_run_clean():
    """The quick start, the comparison and a kernel used alone (the PCD example and the
    10,000-chain run are not run here)."""
    namespace = _run_clean(GETTING_STARTED[:3], "getting-started.md")
    assert namespace["best_first"][0] != "rwm" and all(r["warnings"] == 0 for r in namespace["result"].rows)


def test_the_main_job_is_the_command_the_docs_show():
    main_job = next(line for line in README.splitlines() if "gradmc compare" in line).split("&& ")[-1]
    for page in ("getting-started.md", "cli.md"):
        assert main_job in (ROOT / "docs" / page).read_text(), page
