"""The registered discrete samplers, by family: importing this module registers them all.

* :mod:`~gradmc.discrete.gradient_samplers` — Rhodes & Gutmann's gradient samplers (NCG,
  ordinal NCG, AVG, PAVG, block Gibbs) and what every discrete builder shares;
* :mod:`~gradmc.discrete.local_samplers` — local moves (GWG, ordinal GWG, MH-uniform, Gibbs,
  lattice Metropolis);
* :mod:`~gradmc.discrete.hams_samplers` — Zhou & Tan's DHAMS, PDHAMS and PAVG's variance form.
"""

from gradmc.discrete import gradient_samplers, hams_samplers, local_samplers

__all__ = ["gradient_samplers", "local_samplers", "hams_samplers"]
