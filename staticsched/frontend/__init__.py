"""Frontends: what users write, turned into micro-ops. A TaskGraph is read
(:mod:`.taskgraph`), lowered by its task kinds into an OpGraph (:mod:`.lowering`), and its
NumPy reference computed (:mod:`.reference`). The ONNX importer goes here next."""
