"""The RUN:AI guide's vocabulary: its environment variables and the true/false words they take.

Users of the guide pass ``-e BATCH_SIZE=33 -e USE_VAL="false"`` to ``runai submit-mpi``. The
trainer reads those variables as defaults (``lanenb_trainer.config``) and ``TrainSpec`` honours
them in its ``env`` (``lanenb.contract``); both read this one map and this one set of words, so a
variable or a spelling of "true" cannot work in one place and fail in the other. No torch here:
the notebook side imports it.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["RUNAI_ENV", "TRUE_WORDS", "FALSE_WORDS", "bool_word", "runai_variable"]

# RUN:AI guide variable -> TrainConfig field, in the guide's order
RUNAI_ENV: Mapping[str, str] = {
    "BATCH_SIZE": "batch_size",
    "USE_WORKERS": "use_workers",
    "NUM_WORKERS": "num_workers",
    "USE_VAL": "use_val",
    "VAL_BATCH_SIZE": "val_batch_size",
    "ENABLE_SNAPSHOT": "enable_snapshot",
    "PVC_NAME": "pvc_name",
}

TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off"})


def bool_word(text: str) -> bool | None:
    """``True``/``False`` for a true/false word (any case, surrounding blanks ignored), else
    ``None``: the caller words the error, since only it knows which flag or field was meant."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def runai_variable(field: str) -> str | None:
    """The RUN:AI variable that stands for a ``TrainConfig`` field, if any (for messages)."""
    return next((var for var, name in RUNAI_ENV.items() if name == field), None)
