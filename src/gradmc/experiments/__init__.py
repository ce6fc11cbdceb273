"""Published experiments, one module per paper; importing this package registers them
(``gradmc reproduce NAME``). Each is a recipe: targets, samplers, budget, metrics."""

from gradmc.experiments import nemeth, rhodes_discrete, rhodes_learning, titsias, zhoutan  # noqa: F401
