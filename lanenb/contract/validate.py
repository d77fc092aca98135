"""``validate(spec) -> list[Problem]``: every problem of a spec at once, for forms.

``TrainSpec(...)`` raises on the first bad field, which suits code; a launch panel needs all of
them to disable Launch and say why. The checks are the same ones (``TrainSpec.check``), plus
what the chosen backend checks before submitting (the trainer's own validation locally: does
the dataset exist, are the trainer flags valid; names and manifest rules on Kubernetes).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lanenb.contract.backends import get_backend
from lanenb.contract.spec import TRAINER_FIELDS, SpecError, TrainSpec
from lanenb.home import default_run_dir
from lanenb_trainer.errors import UserError

__all__ = ["Problem", "validate"]

# trainer flag -> TrainSpec field, so a trainer message lands on the right form control
_FLAG_FIELDS = {trainer.replace("_", "-"): field for field, trainer in TRAINER_FIELDS.items()}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: the field (as a form names it), the value and why."""

    field: str
    value: Any
    message: str

    def __str__(self) -> str:
        return self.message


def _from_exception(exc: BaseException) -> Problem:
    if isinstance(exc, SpecError):
        return Problem(exc.field, exc.value, str(exc))
    text = str(exc)
    m = re.match(r"--([a-z-]+)", text)
    field = _FLAG_FIELDS.get(m.group(1), "extra_args") if m else "spec"
    return Problem(field, None, text)


def _unchecked(data: Mapping[str, Any]) -> TrainSpec:
    """A ``TrainSpec`` with ``data`` set but nothing checked yet (``check`` does that)."""
    spec = TrainSpec.__new__(TrainSpec)
    for f in dataclasses.fields(TrainSpec):
        if f.name in data:
            value = data[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:  # only ``dataset`` has no default, and ``validate`` always puts it in ``data``
            raise TypeError(f"_unchecked: no value for {f.name!r} and no default")
        setattr(spec, f.name, value)
    spec.__dict__["_given"] = frozenset(data)  # what the form gave: the RUN:AI rule reads it
    return spec


def validate(spec: TrainSpec | Mapping[str, Any], *, backend: bool = True) -> list[Problem]:
    """Every problem of ``spec`` (a ``TrainSpec`` or a dict of its fields); ``[]`` when it can run.

    Args:
        spec: what a form, a YAML cell or code produced.
        backend: also run the backend's pre-submit checks (local: the trainer's validation,
            e.g. the dataset directory must exist; Kubernetes: names, image, mounts). They run
            only when the fields themselves are fine. No job is started, nothing is written.

    Returns:
        ``Problem`` s in field order; ``str(problem)`` names the field and the bad value.
    """
    problems: list[Problem] = []
    if isinstance(spec, TrainSpec):
        data = {f.name: getattr(spec, f.name) for f in dataclasses.fields(TrainSpec)}
    elif isinstance(spec, Mapping):
        data = TrainSpec.fold_sections(spec)
        known = {f.name for f in dataclasses.fields(TrainSpec)}
        for key in sorted(set(data) - known, key=str):
            problems.append(Problem(str(key), data[key], f"{key!r}: unknown field; known fields: "
                                    f"{', '.join(sorted(known))}"))
            data.pop(key)
        data.setdefault("dataset", None)  # reported by the dataset check
    else:
        return [Problem("spec", spec, f"spec={spec!r}: must be a TrainSpec or a dict of its fields")]
    checked = _unchecked(data)
    problems += [_from_exception(e) for e in checked.check(first=False)]
    if problems or not backend:
        return problems
    try:
        impl = get_backend(checked.backend)
        run_dir = checked.run_dir or (str(default_run_dir(checked.name or "job")) if impl.runs_here else None)
        impl.validate(checked, run_dir)
    except (UserError, ValueError) as exc:
        problems.append(_from_exception(exc))
    return problems
