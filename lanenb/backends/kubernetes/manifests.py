"""``TrainSpec`` -> Kubeflow MPI Operator ``kubeflow.org/v2beta1`` MPIJob (a plain dict).

One builder serves both ``submit`` and ``render`` so what ``kubectl apply`` users get is
exactly what the backend sends. The launcher runs ``mpirun`` (an argv list, never a shell
string) with ``python -m lanenb_trainer``; workers run sshd and get the GPUs. With
``openshift=True`` the pods run as a non-root UID under the restricted policy (``restricted``).
"""

from __future__ import annotations

import base64
import math
import posixpath
from typing import TYPE_CHECKING, Any, cast

import yaml

import lanenb.backends.kubernetes.restricted as restricted
from lanenb.contract.redact import is_secret, redact_data, redact_value
from lanenb.kube.identity import USER_KEY, submitter, user_label_value
from lanenb.kube.names import check_label, check_mpijob_name, check_subdomain
from lanenb.kube.objects import MANAGED_BY
from lanenb.kube.pods import JOB_NAME_LABEL, JOB_ROLE_LABEL
from lanenb.kube.rules import parse_secret_ref, reserved_mount
from lanenb_trainer.errors import UserError

if TYPE_CHECKING:
    from lanenb.contract.spec import TrainSpec

__all__ = [
    "API_VERSION", "KIND", "TRAINER_ENTRYPOINT", "LAUNCHER_WRAPPER", "MANAGED_BY", "JOB_NAME_LABEL", "JOB_ROLE_LABEL",
    "RUNAI_SCHEDULER", "SSH_AUTH_MOUNT_PATH", "MPI_CONFIG_MOUNT_PATH", "LAUNCHER_RESOURCES", "namespace_for",
    "DEFAULT_TERMINATION_GRACE_S", "termination_grace", "WORKER_INIT", "worker_command",
    "cluster_run_dir", "check_cluster_paths", "ssh_auth_mount_path", "mpirun_argv", "env_entries", "build_mpijob",
    "render", "literal_secrets", "env_secret_name", "build_env_secret", "network_policy_name", "build_network_policy",
]

API_VERSION = "kubeflow.org/v2beta1"
KIND = "MPIJob"
TRAINER_ENTRYPOINT = ["python", "-m", "lanenb_trainer"]  # must match trainer/Dockerfile ENTRYPOINT
# The launcher runs mpirun through this wrapper: it waits for every worker's sshd (the operator's
# race) and turns mpirun's "lost host" messages into an error event (lanenb_trainer/launcher.py).
LAUNCHER_WRAPPER = ["python", "-m", "lanenb_trainer.launcher", "--"]
# Each worker runs sshd under this init: sshd as PID 1 exits on the pod's SIGTERM and the kernel kills
# the ranks with it; the init first has the ranks checkpoint (lanenb_trainer/worker_init.py).
WORKER_INIT = ["python", "-m", "lanenb_trainer.worker_init"]
RUNAI_SCHEDULER = "runai-scheduler"
SSH_AUTH_MOUNT_PATH = "/root/.ssh"  # the image runs as root (see trainer/Dockerfile)
MPI_CONFIG_MOUNT_PATH = "/etc/mpi"  # the operator's hostfile ConfigMap (configMountPath)
SHM_VOLUME = "dshm"
# mpirun only starts ranks over ssh and relays their output: a small request, so that quota'd
# namespaces (which refuse pods without requests) accept the launcher and it never takes a GPU node's CPU.
LAUNCHER_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
# Always exported to every rank: Python must not buffer the event lines.
BASE_ENV = {"PYTHONUNBUFFERED": "1"}
# The pods' terminationGracePeriodSeconds (k8s.termination_grace_seconds overrides it). A SIGTERMed
# rank checkpoints at a step boundary (lanenb_trainer/training/preempt.py), so the grace must hold
# the step under way and the next (the ranks read the flags one step late, behind the compute),
# writing last.pt, and the ranks' exit. Measured (AMD EPYC, 2 cores, local disk): last.pt of the
# largest backbone, resnet34 (172 MiB with its momentum buffers), in 0.50 s; vgg16 (158 MiB) 0.24 s;
# small (10 MiB) 0.03 s. A shared volume at 10 MB/s writes resnet34's in 17 s.
PREEMPT_STEP_S = 15.0  # a step: batch 8 of VGG16-SCNN at 288x800 is ~30 ms on an H200 (294 img/s, docs/GPU.md)
PREEMPT_CHECKPOINT_S = 20.0  # resnet34's last.pt on a 10 MB/s volume, with room
PREEMPT_EXIT_S = 10.0  # the ranks' barrier and teardown, mpirun's wind-down
DEFAULT_TERMINATION_GRACE_S = int(2 * PREEMPT_STEP_S + PREEMPT_CHECKPOINT_S + PREEMPT_EXIT_S)  # 60; Kubernetes' is 30
PASSTHROUGH = ("PATH", "LD_LIBRARY_PATH")


class ManifestError(UserError, ValueError):
    """The spec cannot be expressed as an MPIJob; the message names the field."""


def namespace_for(spec: TrainSpec, default: str | None = None) -> str | None:
    """RUN:AI projects live in ``runai-<project>`` namespaces; otherwise ``spec.namespace``, else
    ``default`` (the kubeconfig context's or the pod's namespace, resolved by the backend), else
    None (``render`` then leaves the namespace to ``kubectl``)."""
    if spec.k8s.runai_project:
        return check_label("namespace", f"runai-{spec.k8s.runai_project}")
    if spec.namespace is not None:
        return check_label("namespace", spec.namespace)
    return check_label("namespace", default) if default is not None else None


def cluster_run_dir(spec: TrainSpec) -> str | None:
    """Where rank 0 writes inside the cluster: ``spec.run_dir``, else under the first writable volume."""
    if spec.run_dir:
        return spec.run_dir
    for volume in spec.volumes:
        if not volume.read_only:
            return f"{volume.mount_path.rstrip('/')}/lanenb-runs/{spec.name}"
    return None


def _labels(spec: TrainSpec) -> dict[str, str]:
    labels = {
        **spec.labels, **spec.k8s.labels,  # the user's and a sweep's trial labels: never over lanenb's own
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/name": "lanenb-trainer",
        "app.kubernetes.io/instance": str(spec.name),
        # whose job it is, for the team view (``lanenb jobs list --team``): Kubernetes records no creator
        USER_KEY: user_label_value(submitter()),
    }
    if spec.k8s.runai_project:
        labels["project"] = spec.k8s.runai_project  # RUN:AI attributes pods to projects by this label
    return labels


def _under(path: str, mount: str) -> bool:
    path, mount = posixpath.normpath(path), posixpath.normpath(mount)
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def check_cluster_paths(spec: TrainSpec, run_dir: str | None, *, openshift: bool = False) -> None:
    """The paths the ranks will use must exist in the pods: the run dir on a writable volume, the
    dataset on a mounted one, no volume over a path the operator (or large_shm) mounts itself.

    Raises:
        ManifestError: naming the path and the fix.
    """
    reserved = {MPI_CONFIG_MOUNT_PATH: "the MPI Operator mounts its hostfile there",
                ssh_auth_mount_path(openshift): "the MPI Operator mounts the SSH keys there (sshAuthMountPath)"}
    if openshift:
        reserved[restricted.HOME] = "OpenShift mode mounts the pods' writable HOME (an emptyDir) there"
    if spec.large_shm:
        reserved["/dev/shm"] = "large_shm mounts a memory-backed /dev/shm there"
    for volume in spec.volumes:
        why = reserved_mount(volume.mount_path, reserved)
        if why:
            raise ManifestError(f"volumes={str(volume)!r}: cannot mount at {volume.mount_path}: {why}; "
                                "mount the PVC somewhere else (e.g. /mnt)")
    mounts = ", ".join(str(v) for v in spec.volumes) or "none"
    if run_dir is None:
        raise ManifestError(
            "the job has no writable volume for its run directory (checkpoints, predictions, metrics), so the "
            "trainer would stop with no --run-dir after the pods were scheduled: mount a PVC read-write "
            "(volumes=['NAME:/mnt'], --pvc NAME:/mnt) or give run_dir= under one")
    writable = [v for v in spec.volumes if not v.read_only]
    if not any(_under(run_dir, v.mount_path) for v in writable):
        raise ManifestError(
            f"run_dir={run_dir!r} is not on a writable volume (volumes: {mounts}): rank 0 would write it into the "
            "container, where it is lost with the pod; mount a PVC read-write and put run_dir under it")
    if not posixpath.isabs(spec.dataset) or not any(_under(spec.dataset, v.mount_path) for v in spec.volumes):
        raise ManifestError(
            f"dataset={spec.dataset!r} is not under a mounted volume (volumes: {mounts}): the pods would not find "
            "it; mount the PVC that holds it (volumes=['NAME:/data:ro']) and point dataset= inside it")


def ssh_auth_mount_path(openshift: bool) -> str:
    """The MPIJob's ``sshAuthMountPath``: root's ``~/.ssh``, or the non-root HOME's in OpenShift mode."""
    return restricted.SSH_AUTH_MOUNT_PATH if openshift else SSH_AUTH_MOUNT_PATH


def _env_for(spec: TrainSpec) -> dict[str, str]:
    # torch.distributed (engine=ddp) rendezvous on worker 0 through the operator's headless Service
    # "<job>-worker" (the pods' subdomain); the pod's DNS search path adds the namespace.
    rendezvous = {"MASTER_ADDR": f"{spec.name}-worker-0.{spec.name}-worker", "MASTER_PORT": "29500"}
    # rank 0 labels the VolumeSnapshot it makes with the job (lanenb_trainer.k8s_snapshot)
    job = {"LANENB_JOB_NAME": str(spec.name)} if spec.enable_snapshot and spec.pvc_name else {}
    return {**BASE_ENV, **rendezvous, **job, **spec.env, **spec.k8s.nccl_env}


def env_entries(spec: TrainSpec, *, redact: bool = False, env_secret: str | None = None) -> list[dict[str, Any]]:
    """The containers' ``env``: ``secret:NAME/KEY`` values become ``secretKeyRef``s (the value never
    leaves the cluster); with ``env_secret``, so do literal secrets (``literal_secrets``), read from
    that Secret (``build_env_secret``) instead of sitting in clear in the pod spec, where everyone who
    may ``get pods`` reads them; with ``redact``, literal values of secrets (``lanenb.contract.redact``)
    read ``<redacted>``."""
    out: list[dict[str, Any]] = []
    for key, value in _env_for(spec).items():
        ref = parse_secret_ref(value)
        if ref is None and env_secret is not None and is_secret(key, value):
            ref = (env_secret, key)
        if ref is not None:
            out.append({"name": key, "valueFrom": {"secretKeyRef": {"name": ref[0], "key": ref[1]}}})
        else:
            out.append({"name": key, "value": redact_value(key, value) if redact else value})
    return out


def literal_secrets(spec: TrainSpec) -> dict[str, str]:
    """The env variables whose literal values are secrets (by name, or a credential inside the
    value: ``HTTPS_PROXY=http://user:pass@proxy``); ``secret:`` references are not literal."""
    return {k: v for k, v in _env_for(spec).items() if is_secret(k, v)}


def env_secret_name(spec: TrainSpec) -> str:
    """The Secret that holds ``spec``'s literal secrets: ``<job>-lanenb-env``."""
    return check_subdomain("env Secret name", f"{spec.name}-lanenb-env")


def build_env_secret(spec: TrainSpec, namespace: str, owner: dict[str, Any]) -> dict[str, Any]:
    """The ``v1`` Secret of ``spec``'s literal secrets, owned by the MPIJob ``owner`` (its
    ``metadata`` after create: name and uid): deleting the job deletes the Secret."""
    meta = owner.get("metadata") or {}
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": env_secret_name(spec), "namespace": namespace, "labels": _labels(spec),
                     "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": meta.get("name"),
                                          "uid": meta.get("uid"), "blockOwnerDeletion": False}]},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in literal_secrets(spec).items()},
    }


def network_policy_name(spec: TrainSpec) -> str:
    """The NetworkPolicy that fences the job's pods: ``<job>-lanenb-peers``."""
    return check_subdomain("NetworkPolicy name", f"{spec.name}-lanenb-peers")


def build_network_policy(spec: TrainSpec, namespace: str, owner: dict[str, Any]) -> dict[str, Any]:
    """The ``networking.k8s.io/v1`` NetworkPolicy that lets only the job's own pods (the MPI
    Operator's ``job-name`` label) reach its pods, on every port: sshd, the rendezvous
    (torch.distributed's store, Horovod's controller) and the collectives listen on ports of
    their own choosing and take whoever connects. Egress is left alone (data fetches, image
    pulls). Owned by the MPIJob ``owner``, so it goes with the job."""
    meta = owner.get("metadata") or {}
    peers = {"matchLabels": {JOB_NAME_LABEL: str(spec.name)}}
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": network_policy_name(spec), "namespace": namespace, "labels": _labels(spec),
                     "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": meta.get("name"),
                                          "uid": meta.get("uid"), "blockOwnerDeletion": False}]},
        "spec": {"podSelector": peers, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": peers}]}]},
    }


def termination_grace(spec: TrainSpec) -> int:
    """Seconds between a pod's SIGTERM and its SIGKILL: ``k8s.termination_grace_seconds``, else
    :data:`DEFAULT_TERMINATION_GRACE_S`."""
    return spec.k8s.termination_grace_seconds or DEFAULT_TERMINATION_GRACE_S


def worker_command(spec: TrainSpec, *, openshift: bool = False) -> list[str]:
    """The worker container's command: sshd (through the image's entrypoint in OpenShift mode) under
    :data:`WORKER_INIT`, which waits for the ranks' checkpoint for the pod's grace period less a
    margin (a sixth, at most 10 s: 50 s of the default 60) in which sshd and the init exit before
    the kubelet's SIGKILL."""
    grace = termination_grace(spec)
    sshd = [restricted.ENTRYPOINT, "sshd", str(restricted.SSH_PORT)] if openshift else ["/usr/sbin/sshd", "-De"]
    return [*WORKER_INIT, "--grace", str(grace - min(10, grace // 6)), "--", *sshd]


def mpirun_argv(spec: TrainSpec, run_dir: str | None = None, *, openshift: bool = False) -> list[str]:
    """The launcher's full argv: mpirun options, then the trainer entry point and its flags
    (built by ``lanenb.launch.mpirun.build_mpirun_argv``, the one builder local jobs use too).
    In OpenShift mode mpirun runs as the pod's non-root UID and its ssh uses the workers' port."""
    from lanenb.launch.mpirun import build_mpirun_argv

    extra = ["--mca", "pml", "ob1", "--mca", "btl", "^openib"]
    if openshift:
        # The command line wins over the operator's OMPI_MCA_plm_rsh_args, so repeat its option.
        extra += ["--mca", "plm_rsh_args", f"-p {restricted.SSH_PORT} -o ConnectionAttempts=10"]
    return build_mpirun_argv(
        spec.processes, spec.trainer_args(run_dir or cluster_run_dir(spec)), env=[*PASSTHROUGH, *_env_for(spec)],
        mpirun="mpirun", allow_root=not openshift, oversubscribe=False, default_exports=(),
        extra_mpi_args=extra, entrypoint=TRAINER_ENTRYPOINT)


def _pod_spec(spec: TrainSpec, container: dict[str, Any], *, volumes: bool, openshift: bool) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": termination_grace(spec)}
    if openshift:
        pod["securityContext"] = restricted.pod_security_context()
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
    if openshift:
        pod_volumes.append(restricted.home_volume())
        mounts.append(restricted.home_mount())
    if pod_volumes:
        pod["volumes"] = pod_volumes
        container["volumeMounts"] = mounts
    return pod


def _worker_resources(spec: TrainSpec) -> dict[str, Any]:
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


def build_mpijob(spec: TrainSpec, run_dir: str | None = None, namespace: str | None = None, *,
                 redact: bool = False, resume: bool = False, openshift: bool | None = None,
                 env_secret: str | None = None) -> dict[str, Any]:
    """The MPIJob for ``spec``, checked against the MPI Operator's own rules (names, replica-level
    restart policy, reserved mounts) so that what the operator would silently refuse fails here.

    Args:
        namespace: the namespace when ``spec`` names none (the backend's resolved default).
        redact: literal env values that may be secrets read ``<redacted>`` (for display).
        env_secret: the Secret the literal secrets are read from (see ``env_entries``).
        resume: the trainer continues from ``<run_dir>/checkpoints/last.pt`` (``--resume``).
        openshift: pods for the restricted policy (see ``restricted``); None: ``spec.k8s.openshift``,
            and when that is None too (auto), off: the backend resolves auto against the cluster.

    Raises:
        ManifestError, InvalidNameError: naming the field, the value and the fix.
    """
    slots = spec.k8s.slots_per_worker
    workers = math.ceil(spec.processes / slots)
    name = check_mpijob_name(spec.name, workers)
    namespace = namespace_for(spec, namespace)
    if not spec.image:
        raise ManifestError(
            "image=None: the kubernetes backend needs a container image with the trainer; build trainer/Dockerfile, "
            "push it to a registry the cluster can pull from, and pass image='<registry>/lanenb-trainer:<tag>'"
        )
    if openshift is None:
        openshift = bool(spec.k8s.openshift)
    if openshift and spec.k8s.rdma_resources:
        raise ManifestError(
            f"k8s.rdma_resources={spec.k8s.rdma_resources!r}: RDMA pods need the IPC_LOCK capability, which the "
            "restricted policy of OpenShift mode forbids; run RDMA jobs with k8s.openshift=False (--no-openshift) "
            "in a namespace whose SCC allows IPC_LOCK")
    run_dir = run_dir or cluster_run_dir(spec)
    check_cluster_paths(spec, run_dir, openshift=openshift)
    env = env_entries(spec, redact=redact, env_secret=env_secret)
    labels = _labels(spec)

    launcher_command, launcher_args = LAUNCHER_WRAPPER[:3], LAUNCHER_WRAPPER[3:]
    worker_cmd = worker_command(spec, openshift=openshift)
    if openshift:
        # Through the image's entrypoint (a passwd entry for the arbitrary UID), sshd on a high port.
        launcher_command = [restricted.ENTRYPOINT, *launcher_command]
        launcher_args = ["--ssh-port", str(restricted.SSH_PORT), *launcher_args]
        env = [*env, {"name": "HOME", "value": restricted.HOME}]
    launcher_container: dict[str, Any] = {
        "name": "launcher",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": launcher_command,
        "args": launcher_args + mpirun_argv(spec, run_dir, openshift=openshift) + (["--resume"] if resume else []),
        "env": env,
        "resources": {k: dict(v) for k, v in LAUNCHER_RESOURCES.items()},
    }
    worker_container: dict[str, Any] = {
        "name": "worker",
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": worker_cmd,
        "env": [dict(e) for e in env],  # a copy: shared lists would render as YAML anchors
    }
    if openshift:
        launcher_container["securityContext"] = restricted.container_security_context()
        worker_container["securityContext"] = restricted.container_security_context()
    resources = _worker_resources(spec)
    if resources:
        worker_container["resources"] = resources
    if spec.k8s.rdma_resources:  # never in OpenShift mode (refused above)
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

    launcher_pod = _pod_spec(spec, launcher_container, volumes=False, openshift=openshift)
    worker_pod = _pod_spec(spec, worker_container, volumes=True, openshift=openshift)
    # restartPolicy belongs on the replica: the operator overwrites a pod template's with the
    # replica's, whose launcher default is OnFailure (the container restarts in place, its log
    # lost). Never: a failed launcher pod stays with its log, and the launcher Job makes a new one
    # while runPolicy.backoffLimit allows; that one continues from the run's checkpoint (--run-id).
    annotations = {"lanenb/spec-processes": str(spec.processes), USER_KEY: submitter()}  # the name as given
    if run_dir:
        annotations["lanenb/run-dir"] = run_dir
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations}
    if namespace is None:
        del metadata["namespace"]  # kubectl apply puts it in the current context's namespace
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {
            "slotsPerWorker": slots,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": ssh_auth_mount_path(openshift),
            # Start mpirun only once sshd answers on every worker, instead of failing and retrying.
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": run_policy,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never",
                             "template": {"metadata": {"labels": dict(labels)}, "spec": launcher_pod}},
                "Worker": {"replicas": workers, "restartPolicy": "Never",
                           "template": {"metadata": {"labels": dict(labels)}, "spec": worker_pod}},
            },
        },
    }


def render(spec: TrainSpec, run_dir: str | None = None, namespace: str | None = None, *,
           redact: bool = True, openshift: bool | None = None) -> str:
    """The MPIJob as YAML, for users who prefer ``kubectl apply -f``.

    Literal env values that may be secrets read ``<redacted>`` unless ``redact=False``: put
    secrets in a Kubernetes Secret and pass ``-e NAME=secret:SECRET/KEY`` instead.
    """
    job = build_mpijob(spec, run_dir, namespace, redact=redact, openshift=openshift)
    if redact:  # credentials inside other values too (a --url with a token in the trainer's args)
        job = redact_data(job)
    return yaml.safe_dump(job, sort_keys=False, default_flow_style=False)


def redact_mpijob(job: dict[str, Any] | None) -> dict[str, Any] | None:
    """A copy of an MPIJob (as read from the cluster) whose literal env values that may be secrets
    read ``<redacted>``, and credentials inside any other value (args, annotations) too, for
    ``describe`` and anything else that prints it."""
    if job is None:
        return None
    return cast(dict[str, Any], redact_data(job))
