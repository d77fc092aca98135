"""A sweep's search space, written as the values of the flags it varies.

On the command line and in ``%lanesweep`` a flag whose value is a range or a list is searched
over instead of fixed; in Python the same strings (or lists) go in a ``{flag: value}`` dict:

    --lr 1e-3..1e-1:log        a float between the bounds, sampled on a log scale
    --momentum 0.8..0.99       a float, uniform
    --warmup-steps 0..100:int  an integer (``:int:log`` for a log scale)
    --batch-size 4,8,16        one of these values (numbers stay numbers)

The space becomes Optuna distributions (Optuna does the sampling); ``to_dict``/``from_dict``
keep it in the study so a re-attached or restarted driver searches the same space.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lanenb.errors import UserError

__all__ = ["Dimension", "SearchSpace", "SearchSpaceError", "is_search_value", "parse_dimension"]

_RANGE = re.compile(r"^\s*(?P<low>[^.][^:]*?)\s*\.\.\s*(?P<high>[^:]+?)\s*(?P<opts>(:[a-z]+)*)\s*$")


class SearchSpaceError(UserError, ValueError):
    """A search dimension that cannot be searched: the message names the flag and its value."""


@dataclass(frozen=True)
class Dimension:
    """One searched flag: ``kind`` is ``float``, ``int`` or ``choice``."""

    name: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()

    def distribution(self) -> Any:
        """The Optuna distribution that samples this dimension."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.kind == "choice":
            return CategoricalDistribution(list(self.choices))
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log)  # type: ignore[arg-type]
        return FloatDistribution(float(self.low), float(self.high), log=self.log)  # type: ignore[arg-type]

    def text(self) -> str:
        """How a user writes it (``1e-3..1e-1:log``), for tables and ``describe``."""
        if self.kind == "choice":
            return ",".join(str(c) for c in self.choices)
        opts = (":int" if self.kind == "int" else "") + (":log" if self.log else "")
        return f"{self.low:g}..{self.high:g}{opts}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "low": self.low, "high": self.high, "log": self.log,
                "choices": list(self.choices)}


def _number(text: str) -> int | float | str:
    """``"8"`` -> 8, ``"1e-3"`` -> 0.001, anything else stays text (``vgg16``, ``true``)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def is_search_value(value: Any) -> bool:
    """Whether a flag's value asks for a search (``a..b`` or ``a,b,...``) rather than one value."""
    if isinstance(value, (list, tuple)):
        return True
    return isinstance(value, str) and (".." in value or "," in value)


def parse_dimension(name: str, value: Any) -> Dimension:
    """One flag's search values as a :class:`Dimension`.

    Args:
        name: the flag, with or without dashes (``--lr``, ``lr``, ``batch-size``).
        value: ``"low..high[:int][:log]"``, ``"a,b,c"`` or a list of values.

    Raises:
        SearchSpaceError: bounds that are not numbers or not increasing, a log scale that
            reaches 0 or below, an unknown option, fewer than two choices or repeated ones.
    """
    flag = "--" + name.lstrip("-").replace("_", "-")
    key = flag[2:].replace("-", "_")
    if isinstance(value, (list, tuple)):
        choices = tuple(value)
    elif isinstance(value, str) and ".." in value:
        return _parse_range(flag, key, value)
    elif isinstance(value, str) and "," in value:
        choices = tuple(_number(part.strip()) for part in value.split(","))
    else:
        raise SearchSpaceError(f"{flag} {value!r} is not a search: write low..high[:int][:log] or a,b,c")
    if len(choices) < 2 or any(c == "" for c in choices):
        raise SearchSpaceError(f"{flag} {value!r}: a choice needs at least two non-empty values")
    if len(set(map(repr, choices))) != len(choices):
        raise SearchSpaceError(f"{flag} {value!r}: a value is listed twice")
    if not all(isinstance(c, (int, float, str, bool)) for c in choices):
        raise SearchSpaceError(f"{flag} {value!r}: choices must be numbers, words or booleans")
    return Dimension(key, "choice", choices=choices)


def _parse_range(flag: str, key: str, value: str) -> Dimension:
    found = _RANGE.match(value)
    if not found:
        raise SearchSpaceError(f"{flag} {value!r} is not a range: write low..high[:int][:log], e.g. 1e-3..1e-1:log")
    low, high = _number(found["low"]), _number(found["high"])
    opts = [o for o in found["opts"].split(":") if o]
    unknown = [o for o in opts if o not in ("int", "log")]
    if unknown:
        raise SearchSpaceError(f"{flag} {value!r}: unknown option :{unknown[0]} (only :int and :log)")
    if isinstance(low, str) or isinstance(high, str):
        raise SearchSpaceError(f"{flag} {value!r}: both bounds must be numbers")
    kind = "int" if "int" in opts else "float"
    if kind == "int" and not (float(low).is_integer() and float(high).is_integer()):
        raise SearchSpaceError(f"{flag} {value!r}: :int bounds must be whole numbers")
    if not low < high:
        raise SearchSpaceError(f"{flag} {value!r}: the low bound must be below the high one")
    log = "log" in opts
    if log and low <= 0:
        raise SearchSpaceError(f"{flag} {value!r}: a :log range must stay above 0")
    if kind == "int":
        low, high = int(low), int(high)
    return Dimension(key, kind, low=low, high=high, log=log)


@dataclass(frozen=True)
class SearchSpace:
    """The searched flags, in the order given."""

    dimensions: tuple[Dimension, ...]

    @classmethod
    def parse(cls, space: Mapping[str, Any]) -> SearchSpace:
        """``{"lr": "1e-3..1e-1:log", "batch_size": [4, 8]}`` -> a space.

        Raises:
            SearchSpaceError: an empty space, a flag given twice (``lr`` and ``--lr``) or a bad value.
        """
        if not isinstance(space, Mapping) or not space:
            raise SearchSpaceError("a sweep needs a search space: e.g. {'lr': '1e-3..1e-1:log'} "
                                   "(--lr 1e-3..1e-1:log on the command line)")
        dims = [parse_dimension(str(name), value) for name, value in space.items()]
        names = [d.name for d in dims]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SearchSpaceError(f"--{twice[0].replace('_', '-')} is searched twice")
        return cls(tuple(dims))

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def distributions(self) -> dict[str, Any]:
        return {d.name: d.distribution() for d in self.dimensions}

    def grid(self) -> dict[str, list[Any]]:
        """The values a grid search walks: choices only (a grid over a continuous range is
        not a grid).

        Raises:
            SearchSpaceError: a range in the space, naming it.
        """
        ranges = [d for d in self.dimensions if d.kind != "choice"]
        if ranges:
            flag = "--" + ranges[0].name.replace("_", "-")
            raise SearchSpaceError(f"the grid sampler walks lists only: {flag} {ranges[0].text()} is a range "
                                   "(give it as a,b,c, or use --sampler tpe or random)")
        return {d.name: list(d.choices) for d in self.dimensions}

    def size(self) -> int | None:
        """How many points a grid holds, or None when a range makes it unbounded."""
        if any(d.kind != "choice" for d in self.dimensions):
            return None
        return math.prod(len(d.choices) for d in self.dimensions)

    def to_dict(self) -> list[dict[str, Any]]:
        return [d.to_dict() for d in self.dimensions]

    @classmethod
    def from_dict(cls, data: Sequence[Mapping[str, Any]]) -> SearchSpace:
        return cls(tuple(Dimension(d["name"], d["kind"], d.get("low"), d.get("high"), bool(d.get("log")),
                                   tuple(d.get("choices") or ())) for d in data))
