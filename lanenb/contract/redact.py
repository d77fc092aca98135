"""Keep secret values out of everything lanenb stores or shows (registry, ``jobs show``,
``describe``, rendered manifests, logs).

A job's ``env`` is the usual way to hand a rank a credential (``WANDB_API_KEY``, an S3
token...). Its *value* must reach the ranks, but never the SQLite registry (readable by
anyone who can read ``LANENB_HOME``), a printed manifest or a notebook output. The rule is
by name, so it needs no configuration: a variable whose name contains one of
:data:`SECRET_WORDS` is a secret. A value written as a Kubernetes secret reference
(``secret:SECRET/KEY``) is not itself secret and is kept, so a stored job can still say
where its credential comes from.

Used by ``lanenb.registry.jobs`` (what is stored), ``Job.describe`` (what is shown) and the
Kubernetes backend (``render`` / ``describe``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "REDACTED",
    "SECRET_REF_PREFIX",
    "SECRET_WORDS",
    "is_secret_name",
    "is_secret_ref",
    "redact_env",
    "redact_env_list",
    "redact_spec",
    "redact_text",
    "redact_value",
]

REDACTED = "<redacted>"
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "CREDENTIAL", "AUTH",
                "PRIVATE")
SECRET_REF_PREFIX = "secret:"

_SECRET_NAME = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """True for variable names that carry credentials: ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``,
    ``DB_PASSWORD``, ``WANDB_API_KEY``...; case-insensitive substring match on purpose
    (``MY_S3_KEY_ID`` too: redacting one harmless value costs less than leaking one)."""
    return bool(_SECRET_NAME.search(str(name)))


def is_secret_ref(value: Any) -> bool:
    """``secret:NAME/KEY``: a reference to a Kubernetes Secret, safe to store and show."""
    return isinstance(value, str) and value.startswith(SECRET_REF_PREFIX)


def redact_value(name: str, value: Any) -> Any:
    """``value``, or :data:`REDACTED` when ``name`` is a secret's name (references are kept)."""
    if value is None or value == "" or is_secret_ref(value) or not is_secret_name(name):
        return value
    return REDACTED


def redact_env(env: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``{NAME: value}`` with the secrets' values replaced by :data:`REDACTED`."""
    return {k: redact_value(k, v) for k, v in (env or {}).items()}


def redact_env_list(env: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """A copy of a Kubernetes container ``env`` list (``[{"name": ..., "value": ...}]``) with
    literal secret values redacted; ``valueFrom`` entries (secretKeyRef...) are kept as is."""
    out: list[dict[str, Any]] = []
    for item in env or []:
        item = dict(item)
        if "value" in item:
            item["value"] = redact_value(str(item.get("name", "")), item["value"])
        out.append(item)
    return out


def redact_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a ``TrainSpec.to_dict()`` with its ``env`` redacted (the registry's form)."""
    data = dict(spec)
    if isinstance(data.get("env"), Mapping):
        data["env"] = redact_env(data["env"])
    return data


def redact_text(text: str, env: Mapping[str, Any] | None) -> str:
    """``text`` with every secret value of ``env`` replaced by :data:`REDACTED` (for log lines
    and rendered documents that may echo a value). Values shorter than 4 characters are left
    alone: replacing "1" everywhere would garble the text and protect nothing."""
    secrets = sorted({str(v) for k, v in (env or {}).items()
                      if redact_value(k, v) == REDACTED and len(str(v)) >= 4}, key=len, reverse=True)
    for value in secrets:
        text = text.replace(value, REDACTED)
    return text
