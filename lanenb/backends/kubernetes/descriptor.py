"""The ``kubernetes`` backend as the faces and ``TrainSpec`` see it (registered as a plug-in's
descriptor is, ``lanenb.contract.backends``): its options (``options.py``), flags and
capabilities. Imports neither the backend nor the ``kubernetes`` client."""

from __future__ import annotations

from typing import Any

from lanenb.contract.descriptor import BackendDescriptor, Capabilities

__all__ = ["DESCRIPTOR"]

FLAGS: tuple[Any, ...] = (
    (("--project", "-p"), dict(dest="runai_project", metavar="PROJECT",
                               help="RUN:AI project: namespace runai-PROJECT and the runai scheduler")),
    (("--context",), dict(metavar="CTX", help="kubeconfig context")),
    (("--openshift",), dict(action="store_true", default=None,
                            help="pods for OpenShift's restricted SCC / Pod Security restricted: non-root UID, "
                                 "sshd on port 2222 (default: when the cluster serves security.openshift.io)")),
    (("--no-openshift",), dict(dest="openshift", action="store_false", default=None,
                               help="root pods (sshd on port 22) even on OpenShift")),
    (("--no-network-policy",), dict(dest="network_policy", action="store_false", default=None,
                                    help="no NetworkPolicy that lets only the job's own pods reach its pods "
                                         "(where the cluster's own policies isolate jobs)")),
)

DESCRIPTOR = BackendDescriptor(
    "kubernetes", "lanenb.backends.kubernetes.backend:KubernetesBackend",
    summary="a Kubeflow MPIJob on a Kubernetes cluster",
    options="lanenb.backends.kubernetes.options:KubernetesOptions", section="k8s", flags=FLAGS,
    capabilities=Capabilities(volumes=True, snapshot_store="kubernetes", suspend_resume=True, secret_refs=True,
                              gpus_optional=False))
