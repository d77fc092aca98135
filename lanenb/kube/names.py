"""Name checks applied before any request leaves the machine, on the one rule set of
``lanenb.kube.rules`` (shared with ``TrainSpec``'s field checks).

The apiserver would reject a bad name too, but only after a round trip and with a message
about the object rather than the notebook argument that produced it; the MPI Operator would
not even reject it: it records an event and never creates a pod.
"""

from __future__ import annotations

from lanenb.kube.rules import LABEL_MAX, SUBDOMAIN_MAX, mpijob_name_problem, name_problem
from lanenb_trainer.errors import UserError

__all__ = ["InvalidNameError", "check_label", "check_subdomain", "check_mpijob_name", "LABEL_MAX", "SUBDOMAIN_MAX"]


class InvalidNameError(UserError, ValueError):
    """A Kubernetes object name is not valid; the message names what and the bad value."""


def check_label(what: str, value: object, max_len: int = LABEL_MAX) -> str:
    """An RFC 1123 label (namespaces, MPIJob names: they become pod/service names)."""
    problem = name_problem(value, "label", max_len)
    if problem:
        raise InvalidNameError(f"{what} {value!r} {problem}")
    assert isinstance(value, str)  # name_problem passes strings only
    return value


def check_subdomain(what: str, value: object) -> str:
    """An RFC 1123 subdomain (PVCs, service accounts, Secrets)."""
    problem = name_problem(value, "subdomain")
    if problem:
        raise InvalidNameError(f"{what} {value!r} {problem}")
    assert isinstance(value, str)  # name_problem passes strings only
    return value


def check_mpijob_name(value: object, workers: int) -> str:
    """A job name the MPI Operator accepts with ``workers`` workers (see ``mpijob_name_problem``)."""
    name = check_label("job name", value)
    problem = mpijob_name_problem(name, workers)
    if problem:
        raise InvalidNameError(f"job name {name!r}: {problem}")
    return name
