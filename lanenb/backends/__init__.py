"""Job backends: where a ``TrainSpec`` runs. One sub-package per backend, each implementing
``lanenb.contract.backend.Backend`` and named in ``lanenb.contract.backends``' registry
(loaded lazily, so the local backend never imports the ``kubernetes`` client).

Add a backend (e.g. Slurm): a sub-package here with a ``Backend`` subclass, then
``register_backend("slurm", "lanenb.backends.slurm:SlurmBackend")``."""
