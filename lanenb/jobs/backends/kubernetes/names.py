"""RFC 1123 name checks, applied before any request leaves the machine.

The apiserver would reject a bad name too, but only after a round trip and with a message
about the object rather than the notebook argument that produced it.
"""

from __future__ import annotations

from lanenb_trainer.errors import UserError

from lanenb.jobs.spec import RFC1123_LABEL as _LABEL
from lanenb.jobs.spec import RFC1123_SUBDOMAIN as _SUBDOMAIN

__all__ = ["InvalidNameError", "check_label", "check_subdomain", "LABEL_MAX", "SUBDOMAIN_MAX"]

LABEL_MAX = 63
SUBDOMAIN_MAX = 253


class InvalidNameError(UserError, ValueError):
    """A Kubernetes object name is not valid; the message names what and the bad value."""


def check_label(what: str, value: object, max_len: int = LABEL_MAX) -> str:
    """An RFC 1123 label (namespaces, MPIJob names: they become pod/service names)."""
    if not isinstance(value, str) or not value:
        raise InvalidNameError(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > max_len:
        raise InvalidNameError(f"{what} {value!r} is {len(value)} characters long; Kubernetes allows at most {max_len}")
    if not _LABEL.match(value):
        raise InvalidNameError(
            f"{what} {value!r} is not a valid RFC 1123 label: use lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return value


def check_subdomain(what: str, value: object) -> str:
    """An RFC 1123 subdomain (PVCs, service accounts)."""
    if not isinstance(value, str) or not value:
        raise InvalidNameError(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > SUBDOMAIN_MAX or not _SUBDOMAIN.match(value):
        raise InvalidNameError(
            f"{what} {value!r} is not a valid RFC 1123 name: lowercase letters, digits, '-' and '.', "
            f"starting and ending with a letter or digit, at most {SUBDOMAIN_MAX} characters"
        )
    return value
