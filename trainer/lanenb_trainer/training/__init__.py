"""One rank's training run, in parts a reader can take one at a time.

``loop.py`` is the ``Trainer``: epochs, steps, the events a run emits. It is put together
from ``build.py`` (the splits, the model and optimizer, the train loader), resumed and
checkpointed by ``resume.py`` (what makes ``--resume`` exact), scored by ``evaluate.py``
(validation and the TuSimple test submission), with ``replicas.py`` keeping every rank's
model the same and ``snapshot.py`` the ``ENABLE_SNAPSHOT`` step at the end. The entry point
(``python -m lanenb_trainer``, error handling, signals) is ``lanenb_trainer.train``.
"""
