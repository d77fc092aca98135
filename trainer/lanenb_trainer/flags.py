"""How trainer options are spelled on a command line: the one ``field -> --flag`` writer.

``TrainConfig.to_argv`` (the local launcher, ``lanenb train``) and ``TrainSpec.trainer_args``
(every backend, through ``lanenb.launch.mpirun.trainer_argv``) both write trainer argv with
:func:`to_flags`, so a flag cannot be spelled one way locally and another way in a pod. No
torch here: the notebook side imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["NEGATABLE", "flag_name", "to_flags"]

# Switches with a ``--no-`` form (``add_train_arguments`` defines both); other switches, such as
# ``--resume``, exist only in their positive form.
NEGATABLE = ("use_workers", "use_val", "augment", "amp", "channels_last", "enable_snapshot", "tensorboard")


def flag_name(field: str) -> str:
    """``batch_size`` -> ``--batch-size``."""
    return "--" + field.replace("_", "-")


def to_flags(options: Mapping[str, Any]) -> list[str]:
    """Trainer argv from ``TrainConfig`` field values, in the mapping's order.

    ``batch_size=4`` -> ``--batch-size 4``; ``True`` -> ``--flag``; ``False`` -> ``--no-flag``
    for a switch in :data:`NEGATABLE` and nothing for the others (``--resume`` off is its
    absence); ``None`` -> nothing (the trainer's default, or its RUN:AI variable, applies).
    """
    argv: list[str] = []
    for field, value in options.items():
        if value is None:
            continue
        flag = flag_name(field)
        if isinstance(value, bool):
            if value:
                argv.append(flag)
            elif field in NEGATABLE:
                argv.append("--no-" + flag[2:])
        else:
            argv += [flag, str(value)]
    return argv
