"""Published experiments, one module per experiment; importing this package registers them
(``gradmc reproduce NAME``). Each is a recipe: targets, samplers, budget, metrics.

:mod:`~gradmc.experiments.common` holds what they share (budgets, figures, table cells,
rank agreement); :mod:`~gradmc.experiments.rhodes_learning` the PCD-learning pieces of the
three Rhodes & Gutmann learning experiments. Dependencies only the experiments need
(equinox, cvxpy) are imported when an experiment runs, not here.
"""

from gradmc.experiments import (  # noqa: F401  (registers the experiments)
    nemeth,
    rhodes_discrete,
    rhodes_ebm,
    rhodes_ising,
    rhodes_step_robustness,
    textbook_denoising,
    titsias,
    zhoutan,
)
