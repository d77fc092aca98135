"""Who submits: the person at the notebook, as a label value every lanenb object carries.

Kubernetes keeps no "created by" on an object (``managedFields`` names the client program, not
the person), so a team view could not say whose job is whose. lanenb labels each MPIJob with
``lanenb.io/user`` at submit: the JupyterHub user (``$JUPYTERHUB_USER``, the name the Hub shows),
else the OS account (``getpass.getuser()``), made a valid label value (``user_label_value``);
the unchanged name goes in the annotation of the same key, since a label value cannot hold an
e-mail address. ``$LANENB_USER`` overrides both (a shared service account submitting for a person).
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Mapping

__all__ = ["USER_KEY", "submitter", "user_label_value", "user_of", "RUNAI_USER_LABEL"]

USER_KEY = "lanenb.io/user"  # the label (sanitised) and the annotation (as given) of the submitter
RUNAI_USER_LABEL = "user"  # RUN:AI's CLI labels its workloads with the submitter under this key
_NOT_ALLOWED = re.compile(r"[^-A-Za-z0-9_.]+")
_EDGES = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
LABEL_VALUE_MAX = 63


def submitter(env: Mapping[str, str] | None = None) -> str:
    """The person submitting: ``$LANENB_USER``, else ``$JUPYTERHUB_USER``, else the OS account."""
    env = os.environ if env is None else env
    for key in ("LANENB_USER", "JUPYTERHUB_USER"):
        if (env.get(key) or "").strip():
            return env[key].strip()
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the UID (an OpenShift pod's arbitrary UID)
        return "unknown"


def user_label_value(name: str) -> str:
    """``name`` as a valid label value (apimachinery ``IsValidLabelValue``: at most 63 of
    letters, digits, ``-``, ``_``, ``.``, alphanumeric at both ends): each run of other
    characters becomes ``_`` (``alice@example.com`` -> ``alice_example.com``); never empty."""
    value = _EDGES.sub("", _NOT_ALLOWED.sub("_", name))[:LABEL_VALUE_MAX]
    return _EDGES.sub("", value) or "unknown"


def user_of(metadata: Mapping[str, object]) -> str | None:
    """Whose object this is: lanenb's annotation (the name as given), its label, RUN:AI's
    ``user`` label; None when nothing says (a job submitted by an older lanenb or by hand)."""
    annotations = metadata.get("annotations") or {}
    labels = metadata.get("labels") or {}
    assert isinstance(annotations, Mapping) and isinstance(labels, Mapping)
    for value in (annotations.get(USER_KEY), labels.get(USER_KEY), labels.get(RUNAI_USER_LABEL)):
        if isinstance(value, str) and value:
            return value
    return None
