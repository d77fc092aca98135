"""Kubernetes' own rules for values, without the Kubernetes client: the one name checker.

``TrainSpec`` (field checks, ``SpecError``) and the Kubernetes backend (manifest checks,
``InvalidNameError``) both ask ``name_problem``, so a name is judged by one rule whoever
checks it. The rules are apimachinery's ``IsDNS1123Label``, ``IsDNS1123Subdomain`` and
``IsDNS1035Label``, plus the MPI Operator's rule that ``<job>-worker-<N-1>`` and
``<job>-launcher`` must be DNS-1035 labels (they become pod host names and Service names).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["RFC1123_LABEL", "RFC1123_SUBDOMAIN", "DNS1035_LABEL", "LABEL_MAX", "SUBDOMAIN_MAX", "name_problem",
           "mpijob_name_problem", "toleration_problem", "label_problem", "reserved_mount", "SECRET_REF",
           "parse_secret_ref"]

LABEL_MAX = 63
SUBDOMAIN_MAX = 253
RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RFC1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# apimachinery IsQualifiedName: [prefix/]name, name <= 63 of [-A-Za-z0-9_.] with alphanumeric ends
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# apimachinery IsValidLabelValue: empty, or <= 63 of [-A-Za-z0-9_.] with alphanumeric ends
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

_KINDS = {
    "label": (RFC1123_LABEL, LABEL_MAX, ("an RFC 1123 label: lowercase letters, digits and '-', starting and "
                                         "ending with a letter or digit")),
    "subdomain": (RFC1123_SUBDOMAIN, SUBDOMAIN_MAX, ("an RFC 1123 name: lowercase letters, digits, '-' and '.', "
                                                     "dot-separated parts that start and end with a letter or digit")),
    "dns1035": (DNS1035_LABEL, LABEL_MAX, ("a DNS-1035 label: lowercase letters, digits and '-', starting with a "
                                           "letter and ending with a letter or digit")),
}


def name_problem(value: Any, kind: str = "label", max_len: int | None = None) -> str | None:
    """Why ``value`` is not a valid name of ``kind`` ("label", "subdomain", "dns1035"), or None."""
    pattern, limit, words = _KINDS[kind]
    limit = limit if max_len is None else max_len
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if len(value) > limit:
        return f"is {len(value)} characters; the limit is {limit}"
    if not pattern.match(value):
        return f"must be {words}"
    return None


def mpijob_name_problem(name: str, workers: int) -> str | None:
    """The MPI Operator's name rule (``validateMPIJobName``): the last worker's pod name and the
    launcher's name must be DNS-1035 labels, or the operator records a ValidationError event and
    never creates a pod. None when the name is fine."""
    for derived in (f"{name}-worker-{max(workers, 1) - 1}", f"{name}-launcher"):
        why = name_problem(derived, "dns1035")
        if why:
            fix = ("start the name with a letter" if derived[:1].isdigit() else
                   f"use at most {LABEL_MAX - (len(derived) - len(name))} characters" if len(derived) > LABEL_MAX
                   else "use lowercase letters, digits and '-'")
            return (f"the MPI Operator names a pod {derived!r}, which {why.replace('must be', 'is not')}, "
                    f"so it would never start the job: {fix}")
    return None


_TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}


def toleration_problem(tol: Mapping[str, Any]) -> str | None:
    """apiserver's ``validateTolerations`` for one toleration, or None when it is valid."""
    unknown = sorted(set(tol) - _TOLERATION_KEYS)
    if unknown:
        return f"unknown field(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(_TOLERATION_KEYS))}"
    key, op, value = tol.get("key") or "", tol.get("operator") or "Equal", tol.get("value") or ""
    effect = tol.get("effect") or ""
    if op not in ("Equal", "Exists"):
        return "operator must be Equal or Exists"
    if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        return "effect must be NoSchedule, PreferNoSchedule or NoExecute"
    if key:
        if _key_problem(key):
            return f"key {key!r} is not a valid label key ([prefix/]name, name of letters, digits, '-', '_', '.')"
    elif op != "Exists":
        return "an empty key needs operator Exists (it matches every taint)"
    if op == "Exists" and value:
        return "value must be empty when operator is Exists"
    if not isinstance(value, str):
        return "value must be a string"
    if "tolerationSeconds" in tol:
        seconds = tol["tolerationSeconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            return "tolerationSeconds must be an integer"
        if effect != "NoExecute":
            return "tolerationSeconds needs effect NoExecute"
    return None


def _key_problem(key: str) -> bool:
    """Whether ``key`` breaks apimachinery's ``IsQualifiedName`` (``[prefix/]name``)."""
    prefix, _, name = key.rpartition("/")
    return bool(prefix and name_problem(prefix, "subdomain")) or len(name) > LABEL_MAX \
        or not _QUALIFIED_NAME.match(name)


def label_problem(key: Any, value: Any) -> str | None:
    """Why ``key: value`` is not a Kubernetes label the API server accepts (``IsQualifiedName``
    for the key, ``IsValidLabelValue`` for the value), or None."""
    if not isinstance(key, str) or not key or _key_problem(key):
        return (f"label key {key!r} is not valid: [prefix/]name, the name 1-63 letters, digits, '-', '_' or '.' "
                "with alphanumeric ends, the prefix a DNS subdomain (lanenb.io)")
    if not isinstance(value, str) or len(value) > LABEL_MAX or not _LABEL_VALUE.match(value):
        return (f"label {key}={value!r} is not valid: a value is a string of 0-63 letters, digits, '-', '_' or '.' "
                "with alphanumeric ends (no '/', spaces or commas)")
    return None


def reserved_mount(path: str, reserved: Mapping[str, str]) -> str | None:
    """The reason ``path`` may not be mounted (it is, or is under, a path in ``reserved``), or None."""
    clean = "/" + path.strip("/")
    for taken, why in reserved.items():
        if clean == taken or clean.startswith(taken.rstrip("/") + "/"):
            return why
    return None


SECRET_REF = "secret:"


def parse_secret_ref(value: str) -> tuple[str, str] | None:
    """``secret:NAME/KEY`` -> (NAME, KEY); None for an ordinary value.

    Raises:
        ValueError: the value starts with ``secret:`` but is not ``secret:NAME/KEY``.
    """
    if not isinstance(value, str) or not value.startswith(SECRET_REF):
        return None
    name, sep, key = value[len(SECRET_REF):].partition("/")
    if not sep or name_problem(name, "subdomain") or not key or len(key) > SUBDOMAIN_MAX \
            or not _SECRET_KEY.match(key):
        raise ValueError(f"{value!r} is not secret:NAME/KEY (NAME a Secret in the job's namespace, KEY one of "
                         "its keys: letters, digits, '-', '_', '.')")
    return name, key
