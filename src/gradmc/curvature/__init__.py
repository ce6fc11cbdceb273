"""Curvature models of discrete targets: the HAMS second-order model W with its shift D and
factor L (:mod:`~gradmc.curvature.second_order`), and the forms of W learned in warm-up
where a dense one does not fit — on the Hessian's diagonals (:mod:`~gradmc.curvature.sparse_model`),
of low rank on its range (:mod:`~gradmc.curvature.low_rank_model`), or on its graph
(:mod:`~gradmc.curvature.graph_model`).

The package sits between the warm-up rules (:mod:`gradmc.adapt`, which it uses to pool
statistics over chains) and the kernels (:mod:`gradmc.discrete`, which use it); it imports
neither the kernels nor anything above them.
"""
