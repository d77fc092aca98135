"""Job backends: where a ``TrainSpec`` runs. One sub-package per backend, each implementing
``lanenb.contract.backend.Backend`` and named in ``lanenb.contract.backends``' registry
(loaded lazily, so the local backend never imports the ``kubernetes`` client).

Add a backend (e.g. Slurm): a ``Backend`` subclass and a ``BackendDescriptor``
(``lanenb.contract.descriptor``: options, flags, capabilities, spec check), in your own package
behind a ``lanenb.backends`` entry point, or here with the descriptor in the registry's
``_BUILTIN`` (``tests/plugins/toy_slurm`` is a complete small example)."""
