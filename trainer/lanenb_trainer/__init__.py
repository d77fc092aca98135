"""Rank-side lane-detection training: data, SCNN models, evaluation and the training loop.

Every MPI rank imports this package, so it must never import Jupyter, Kubernetes or
matplotlib: a cluster image carries only torch, numpy, OpenCV and (optionally) Horovod.
"""

__version__ = "0.1.0"
