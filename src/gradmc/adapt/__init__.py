"""Rules that samplers follow during warm-up: step sizes (:mod:`~gradmc.adapt.step_size`) and preconditioners."""
