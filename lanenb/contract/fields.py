"""Field coercers: a raw value from code, YAML, a form or a flag -> the field's clean value.

Each takes the field's name (for the message) and the value, returns the clean value, or
raises ``SpecError`` naming both. ``TrainSpec``, ``KubernetesOptions`` and ``VolumeMount``
check their fields with these, so "must be an integer" reads the same in every part of a
spec; YAML and forms hand in strings, hence the string forms (``"4"``, ``"true"``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from lanenb.errors import SpecError
from lanenb.kube.rules import label_problem, name_problem
from lanenb_trainer.runai import bool_word

T = TypeVar("T")
O = TypeVar("O", bound="BackendOptions")

__all__ = ["coerce_int", "coerce_bool", "check_choice", "coerce_opt_str", "coerce_quantity", "coerce_env",
           "check_rfc1123_label", "check_rfc1123_subdomain", "reject_unknown", "options_from_dict"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Kubernetes resource.Quantity: a decimal number, then a binary/decimal SI suffix or an exponent.
_QUANTITY = re.compile(r"^(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][-+]?\d+)?$")


def coerce_int(field_name: str, value: Any, minimum: int, *, optional: bool = False) -> int | None:
    """An integer >= ``minimum`` (``"4"`` accepted, ``True`` and ``2.5`` refused); ``None`` when
    ``optional``."""
    if value is None and optional:
        return None
    if isinstance(value, str) and re.fullmatch(r"[-+]?\d+", value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field_name, value, "must be an integer")
    if value < minimum:
        raise SpecError(field_name, value, f"must be >= {minimum}")
    return value


def coerce_bool(field_name: str, value: Any) -> bool:
    """A bool, or one of the RUN:AI true/false words (``lanenb_trainer.runai``)."""
    if isinstance(value, bool):
        return value
    parsed = bool_word(value) if isinstance(value, str) else None
    if parsed is None:
        raise SpecError(field_name, value, "must be true or false")
    return parsed


def check_choice(field_name: str, value: Any, choices: Iterable[str]) -> str:
    """``value`` itself, when it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise SpecError(field_name, value, f"must be one of {', '.join(choices)}")
    return value


def coerce_opt_str(field_name: str, value: Any) -> str | None:
    """``None`` or a string that is not blank."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field_name, value, "must be a non-empty string or None")
    return value


def coerce_quantity(field_name: str, value: Any) -> str | None:
    """``None`` or a Kubernetes quantity above zero (``4``, ``"500m"``, ``"16Gi"``) as a string."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not _QUANTITY.match(value.strip()):
        raise SpecError(field_name, value, "must be a Kubernetes quantity such as '4', '500m', '16Gi' or '2G'")
    if float(re.match(r"[\d.]+", value.strip()).group()) <= 0:  # type: ignore[union-attr]
        raise SpecError(field_name, value, "must be greater than zero")
    return value.strip()


def coerce_labels(field_name: str, value: Any) -> dict[str, str]:
    """Labels from a mapping or ``KEY=VALUE`` strings (``--label``, repeatable), each checked
    with the API server's label rules (a key ``[prefix/]name``, a value of 0-63 characters)."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        pairs: dict[Any, Any] = {}
        for entry in value:
            if not isinstance(entry, str) or "=" not in entry:
                raise SpecError(field_name, entry, "must be KEY=VALUE")
            key, _, val = entry.partition("=")
            pairs[key] = val
        value = pairs
    if not isinstance(value, Mapping):
        raise SpecError(field_name, value, "must be a dict of label keys to string values")
    for key, val in value.items():
        problem = label_problem(key, val)
        if problem:
            raise SpecError(field_name, {key: val}, problem)
    return dict(value)


def coerce_env(field_name: str, value: Any) -> dict[str, str]:
    """Environment variables from a mapping or ``-e K=V`` strings (a list, or a single string);
    values become strings (``True`` -> ``"true"``)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = [value]
    items: list[tuple[Any, Any]]
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = []
        for entry in value:
            if not isinstance(entry, str) or "=" not in entry:
                raise SpecError(field_name, entry, "must be KEY=VALUE")
            key, _, val = entry.partition("=")
            items.append((key, val))
    else:
        raise SpecError(field_name, value, "must be a dict or a list of KEY=VALUE strings")
    env: dict[str, str] = {}
    for key, val in items:
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise SpecError(field_name, key, "is not a valid environment variable name "
                            "(letters, digits and '_', not starting with a digit)")
        if isinstance(val, bool):
            val = "true" if val else "false"
        if not isinstance(val, (str, int, float)):
            raise SpecError(field_name, {key: val}, "values must be strings")
        env[key] = str(val)
    return env


def check_rfc1123_label(field_name: str, value: Any, max_len: int = 63) -> str:
    """A Kubernetes label-style name (job name, namespace); the rule is ``lanenb.kube.rules``'."""
    problem = name_problem(value, "label", max_len)
    if problem:
        raise SpecError(field_name, value, problem)
    return value


def check_rfc1123_subdomain(field_name: str, value: Any) -> str:
    """A Kubernetes object name (PVC, service account)."""
    problem = name_problem(value, "subdomain")
    if problem:
        raise SpecError(field_name, value, problem)
    return value


def reject_unknown(cls: type, data: Mapping[str, Any], field_name: str, lead: str) -> None:
    """A typo in a restored or hand-written dict must fail loudly, not be dropped."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(field_name, unknown, f"{lead}: {', '.join(sorted(known))}")


def options_from_dict(cls: type[T], data: Any, section: str) -> T:
    """A backend options object from a dict, itself, or None (the defaults): the one rule of every
    options class's ``from_dict`` (``k8s``, ``azureml``, ``local`` sections), unknown keys refused."""
    if data is None:
        return cls()
    if isinstance(data, cls):
        return data
    article = "an" if cls.__name__[0] in "AEIOU" else "a"
    if not isinstance(data, Mapping):
        raise SpecError(section, data, f"must be {article} {cls.__name__} or a dict of its fields")
    reject_unknown(cls, data, section, "unknown option(s); known")
    return cls(**data)


class BackendOptions:
    """The base of a backend's options dataclass (its descriptor's section): the dict round trip
    every section shares, so a new backend writes its fields and checks, nothing else.
    ``section``: the key in ``TrainSpec.backend_options`` its errors name."""

    section: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[O], data: Any) -> O:
        """From a dict, an instance (kept) or None (the defaults); unknown keys are refused."""
        return options_from_dict(cls, data, cls.section)
