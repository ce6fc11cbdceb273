"""Running chains: the pure loop (:mod:`~gradmc.run.loop`), :func:`sample` with its checks,
sharding, progress and timing (:mod:`~gradmc.run.sampling`), and the on-disk store of
checkpoints and chunks (:mod:`~gradmc.run.store`).
"""

from gradmc.run.loop import run_chains
from gradmc.run.sampling import RunInterrupted, checkpoint_root, initial_positions, sample

__all__ = ["sample", "initial_positions", "checkpoint_root", "run_chains", "RunInterrupted"]
