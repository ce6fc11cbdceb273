"""Curvature models of discrete targets, in every form the kernels take them:

* PAVG's M with the root of M_ε (:mod:`~gradmc.curvature.pavg_model`), formed or by its
  eigendecomposition, each giving ``apply`` and ``apply_root``;
* the HAMS second-order model W with its shift D and factor L
  (:mod:`~gradmc.curvature.second_order`: dense, eigen and low-rank forms) and its sparse
  forms (:mod:`~gradmc.curvature.sparse_w`: by diagonals, on a graph), each giving the HAMS
  kernel ``check_phi``, ``initial_momentum``, ``refresh`` and ``move``;
* the forms of W learned in warm-up where a dense one does not fit — on the Hessian's
  diagonals (:mod:`~gradmc.curvature.sparse_model`), of low rank on its range
  (:mod:`~gradmc.curvature.low_rank_model`), or on its graph
  (:mod:`~gradmc.curvature.graph_model`), each one :class:`~gradmc.curvature.learned_w.LearnedW`
  to the warm-up that learns it (:mod:`~gradmc.curvature.learned_w`).

A kernel is handed one of these forms and calls its operations; which form a target gets
is chosen once, when the model is learned. The package imports nothing above
:mod:`gradmc.base` (:mod:`gradmc.chains` pools the learning sums over chains).
"""
