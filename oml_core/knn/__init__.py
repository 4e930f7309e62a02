"""k-nearest-neighbour search, in one package: the exact memory-bounded search, the knn backends, and the
search over a gallery sharded across processes.

- :mod:`~oml_core.knn.distances`: the distances (``l2``, ``cosine``) and their dtype;
- :mod:`~oml_core.knn.inputs`, :mod:`~oml_core.knn.groups`: the checks of the inputs; items grouped by key (the
  ignored pairs, the ground truth) without a ``Q x G`` comparison;
- :mod:`~oml_core.knn.blocks`: the query x gallery distances in memory-bounded blocks (``iter_distance_blocks``);
- :mod:`~oml_core.knn.top_k`, :mod:`~oml_core.knn.search`: the running top ``k`` and the exact search
  (``search_knn``, ``search_knn_qg``); :mod:`~oml_core.knn.batched`: OML's ``batched_knn`` and ``batched_knn_qg``;
- :mod:`~oml_core.knn.backend_checks`, :mod:`~oml_core.knn.exclusion`, :mod:`~oml_core.knn.appended_rows`: what
  every knn backend (:class:`~oml_core.interfaces.knn.IKnnIndex`) shares; :mod:`~oml_core.knn.exact`: the core's
  ``exact`` backend; :mod:`~oml_core.knn.backend_search`: a backend made from its spec, and the search through it;
- :mod:`~oml_core.knn.sharded`: the exact search over a gallery sharded across the processes of a
  ``torch.distributed`` group.

The interface of a backend stays in :mod:`oml_core.interfaces.knn`. OML's ``oml_core.functional.knn`` gives
``batched_knn`` and ``batched_knn_qg`` (:mod:`oml_core.compat.modules`).
"""
