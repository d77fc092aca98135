"""``TrainSpec`` -> Kubeflow MPI Operator ``kubeflow.org/v2beta1`` MPIJob (a plain dict).

One builder serves both ``submit`` and ``render`` so what ``kubectl apply`` users get is
exactly what the backend sends. The launcher runs ``mpirun`` (an argv list, never a shell
string) with ``python -m lanenb_trainer``; workers run sshd and get the GPUs.
"""

from __future__ import annotations

from lanenb_trainer.errors import UserError

import math
from typing import TYPE_CHECKING, Any

import yaml

from .names import check_label, check_subdomain

if TYPE_CHECKING:
    from ...spec import TrainSpec

__all__ = [
    "API_VERSION", "KIND", "TRAINER_ENTRYPOINT", "MANAGED_BY", "JOB_NAME_LABEL", "JOB_ROLE_LABEL",
    "RUNAI_SCHEDULER", "SSH_AUTH_MOUNT_PATH", "namespace_for", "cluster_run_dir", "mpirun_argv",
    "build_mpijob", "render", "build_volume_snapshot", "build_restored_pvc",
]

API_VERSION = "kubeflow.org/v2beta1"
KIND = "MPIJob"
TRAINER_ENTRYPOINT = ["python", "-m", "lanenb_trainer"]  # must match trainer/Dockerfile ENTRYPOINT
MANAGED_BY = "lanenb"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"  # set by the operator on every pod
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
RUNAI_SCHEDULER = "runai-scheduler"
SSH_AUTH_MOUNT_PATH = "/root/.ssh"  # the image runs as root (see trainer/Dockerfile)
SHM_VOLUME = "dshm"
# Always exported to every rank: Python must not buffer the event lines.
BASE_ENV = {"PYTHONUNBUFFERED": "1"}
PASSTHROUGH = ("PATH", "LD_LIBRARY_PATH")


class ManifestError(UserError, ValueError):
    """The spec cannot be expressed as an MPIJob; the message names the field."""


def namespace_for(spec: "TrainSpec") -> str:
    """RUN:AI projects live in ``runai-<project>`` namespaces; otherwise ``spec.namespace``."""
    if spec.k8s.runai_project:
        return check_label("namespace", f"runai-{spec.k8s.runai_project}")
    return check_label("namespace", spec.namespace)


def cluster_run_dir(spec: "TrainSpec") -> str | None:
    """Where rank 0 writes inside the cluster: ``spec.run_dir``, else under the first writable volume."""
    if spec.run_dir:
        return spec.run_dir
    for volume in spec.volumes:
        if not volume.read_only:
            return f"{volume.mount_path.rstrip('/')}/lanenb-runs/{spec.name}"
    return None


def _labels(spec: "TrainSpec") -> dict[str, str]:
    labels = {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/name": "lanenb-trainer",
        "app.kubernetes.io/instance": str(spec.name),
    }
    if spec.k8s.runai_project:
        labels["project"] = spec.k8s.runai_project  # RUN:AI attributes pods to projects by this label
    return labels


def _env_for(spec: "TrainSpec") -> dict[str, str]:
    # torch.distributed (engine=ddp) rendezvous on worker 0, through the operator's headless Service.
    rendezvous = {"MASTER_ADDR": f"{spec.name}-worker-0.{spec.name}.{namespace_for(spec)}.svc",
                  "MASTER_PORT": "29500"}
    return {**BASE_ENV, **rendezvous, **spec.env, **spec.k8s.nccl_env}


def mpirun_argv(spec: "TrainSpec", run_dir: str | None = None) -> list[str]:
    """The launcher's full argv: mpirun options, then the trainer entry point and its flags."""
    argv = [
        "mpirun", "--allow-run-as-root", "-np", str(spec.processes),
        "-bind-to", "none", "-map-by", "slot", "--tag-output",
        "-mca", "pml", "ob1", "-mca", "btl", "^openib",
    ]
    for name in [*PASSTHROUGH, *_env_for(spec)]:
        argv += ["-x", name]
    return argv + TRAINER_ENTRYPOINT + spec.trainer_args(run_dir)


def _pod_spec(spec: "TrainSpec", container: dict[str, Any], *, volumes: bool) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [container]}
    if spec.k8s.service_account:
        pod["serviceAccountName"] = check_subdomain("k8s.service_account", spec.k8s.service_account)
    if spec.k8s.node_selector:
        pod["nodeSelector"] = dict(spec.k8s.node_selector)
    if spec.k8s.tolerations:
        pod["tolerations"] = [dict(t) for t in spec.k8s.tolerations]
    if spec.k8s.runai_project:
        pod["schedulerName"] = RUNAI_SCHEDULER
    pod_volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if volumes:
        for i, volume in enumerate(spec.volumes):
            check_subdomain("volumes (PVC name)", volume.name)
            vname = f"vol-{i}"
            claim: dict[str, Any] = {"claimName": volume.name}
            if volume.read_only:
                claim["readOnly"] = True
            pod_volumes.append({"name": vname, "persistentVolumeClaim": claim})
            mounts.append({"name": vname, "mountPath": volume.mount_path, "readOnly": volume.read_only})
        if spec.large_shm:
            # The default 64 MiB /dev/shm starves DataLoader workers (RUN:AI's --large-shm).
            pod_volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}})
            mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if pod_volumes:
        pod["volumes"] = pod_volumes
        container["volumeMounts"] = mounts
    return pod


def _worker_resources(spec: "TrainSpec") -> dict[str, Any]:
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    slots = spec.k8s.slots_per_worker
    if spec.gpus:
        limits["nvidia.com/gpu"] = spec.gpus * slots
    for key, count in spec.k8s.rdma_resources.items():
        limits[key] = count
    if spec.cpu:
        limits["cpu"] = requests["cpu"] = spec.cpu
    if spec.memory:
        limits["memory"] = requests["memory"] = spec.memory
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    return resources


def build_mpijob(spec: "TrainSpec", run_dir: str | None = None) -> dict[str, Any]:
    """The MPIJob for ``spec`` (validated names; no defaults left to the operator's mercy)."""
    name = check_label("job name", spec.name)
    namespace = namespace_for(spec)
    if not spec.image:
        raise ManifestError(
            "image=None: the kubernetes backend needs a container image with the trainer; build trainer/Dockerfile, "
            "push it to a registry the cluster can pull from, and pass image='<registry>/lanenb-trainer:<tag>'"
        )
    run_dir = run_dir or cluster_run_dir(spec)
    env = [{"name": k, "value": v} for k, v in _env_for(spec).items()]
    labels = _labels(spec)
    slots = spec.k8s.slots_per_worker
    workers = math.ceil(spec.processes / slots)

    launcher_container: dict[str, Any] = {
        "name": "launcher",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": mpirun_argv(spec, run_dir)[:1],
        "args": mpirun_argv(spec, run_dir)[1:],
        "env": env,
    }
    worker_container: dict[str, Any] = {
        "name": "worker",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["/usr/sbin/sshd", "-De"],
        "env": [dict(e) for e in env],  # a copy: shared lists would render as YAML anchors
    }
    resources = _worker_resources(spec)
    if resources:
        worker_container["resources"] = resources
    if spec.k8s.rdma_resources:
        # RDMA needs locked memory for registered buffers (as the OpenShift guide's MPIJob).
        worker_container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}

    run_policy: dict[str, Any] = {
        "cleanPodPolicy": spec.k8s.clean_pod_policy,
        "backoffLimit": spec.k8s.backoff_limit,
    }
    if spec.k8s.ttl_seconds_after_finished is not None:
        run_policy["ttlSecondsAfterFinished"] = spec.k8s.ttl_seconds_after_finished
    if spec.k8s.active_deadline_seconds is not None:
        run_policy["activeDeadlineSeconds"] = spec.k8s.active_deadline_seconds

    launcher_pod = _pod_spec(spec, launcher_container, volumes=False)
    launcher_pod["restartPolicy"] = "OnFailure" if spec.k8s.backoff_limit else "Never"
    worker_pod = _pod_spec(spec, worker_container, volumes=True)
    annotations = {"lanenb/spec-processes": str(spec.processes)}
    if run_dir:
        annotations["lanenb/run-dir"] = run_dir
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "slotsPerWorker": slots,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": SSH_AUTH_MOUNT_PATH,
            # Start mpirun only once sshd answers on every worker, instead of failing and retrying.
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": run_policy,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"metadata": {"labels": dict(labels)}, "spec": launcher_pod}},
                "Worker": {"replicas": workers, "template": {"metadata": {"labels": dict(labels)}, "spec": worker_pod}},
            },
        },
    }


def render(spec: "TrainSpec", run_dir: str | None = None) -> str:
    """The MPIJob as YAML, for users who prefer ``kubectl apply -f``."""
    return yaml.safe_dump(build_mpijob(spec, run_dir), sort_keys=False, default_flow_style=False)


def build_volume_snapshot(pvc_name: str, snapshot_name: str, namespace: str,
                          snapshot_class: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A CSI VolumeSnapshot of ``pvc_name`` (the RUN:AI guide's ML-versioning step)."""
    check_subdomain("pvc_name", pvc_name)
    check_subdomain("snapshot name", snapshot_name)
    check_label("namespace", namespace)
    body: dict[str, Any] = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": snapshot_name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, **(labels or {})}},
        "spec": {"source": {"persistentVolumeClaimName": pvc_name}},
    }
    if snapshot_class:
        body["spec"]["volumeSnapshotClassName"] = check_subdomain("snapshot_class", snapshot_class)
    return body


def build_restored_pvc(snapshot_name: str, pvc_name: str, namespace: str, size: str,
                       storage_class: str | None = None, access_modes: list[str] | None = None) -> dict[str, Any]:
    """A new PVC whose data comes from a VolumeSnapshot (restore, then retrain from it)."""
    check_subdomain("snapshot name", snapshot_name)
    check_subdomain("pvc_name", pvc_name)
    check_label("namespace", namespace)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": pvc_name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}},
        "spec": {
            "accessModes": access_modes or ["ReadWriteMany"],
            "resources": {"requests": {"storage": size}},
            "dataSource": {"kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io", "name": snapshot_name},
        },
    }
    if storage_class:
        body["spec"]["storageClassName"] = storage_class
    return body
