"""The pod settings of an OpenShift-mode MPIJob (``k8s.openshift``): pods that pass OpenShift's
``restricted`` SCC and Kubernetes Pod Security "restricted".

Under those policies a pod runs as an arbitrary non-root UID (GID 0, no ``/etc/passwd`` entry),
may not bind ports below 1024 nor keep any capability, and finds every path of the image
root-owned. So, unlike the default (root) MPIJob:

- every container says ``runAsNonRoot``, ``allowPrivilegeEscalation: false``, drops ``ALL``
  capabilities, and the pod uses the ``RuntimeDefault`` seccomp profile; no ``runAsUser``: the
  SCC picks the UID from the namespace's range;
- ``HOME`` is an emptyDir at :data:`HOME` (writable by any UID); the operator mounts its SSH
  Secret at ``HOME/.ssh`` (``sshAuthMountPath``) instead of ``/root/.ssh``;
- both containers start through the image's :data:`ENTRYPOINT` (``trainer/entrypoint.sh``),
  which gives the UID a passwd entry (ssh refuses a user without one), and on a worker
  generates host keys under ``HOME`` and runs sshd on :data:`SSH_PORT`;
- mpirun's ssh and the launcher's readiness check use that port; no ``--allow-run-as-root``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HOME", "SSH_AUTH_MOUNT_PATH", "SSH_PORT", "ENTRYPOINT", "HOME_VOLUME", "pod_security_context",
           "container_security_context", "home_volume", "home_mount"]

HOME = "/home/mpiuser"  # the image's home for the arbitrary UID (trainer/Dockerfile, entrypoint.sh)
SSH_AUTH_MOUNT_PATH = f"{HOME}/.ssh"  # where the operator mounts <job>-ssh (id_rsa, authorized_keys)
SSH_PORT = 2222  # unprivileged: a non-root sshd cannot bind 22
ENTRYPOINT = "/usr/local/bin/lanenb-entrypoint"  # trainer/entrypoint.sh in the image
HOME_VOLUME = "home"


def pod_security_context() -> dict[str, Any]:
    """Pod level: non-root, the runtime's default seccomp profile; the UID is the SCC's choice."""
    return {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context() -> dict[str, Any]:
    """Container level, what Pod Security "restricted" requires of every container."""
    return {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def home_volume() -> dict[str, Any]:
    return {"name": HOME_VOLUME, "emptyDir": {}}


def home_mount() -> dict[str, Any]:
    return {"name": HOME_VOLUME, "mountPath": HOME}
