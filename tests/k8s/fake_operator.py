"""A test-only MPI Operator + Job controller + scheduler + kubelet inside the emulator's event loop.

It follows the real pieces' rules (MPI Operator v0.8.2 ``mpi_job_controller.go``/``validation.go``,
the batch Job controller, the kubelet), in miniature:

- the operator defaults the launcher replica's ``restartPolicy`` to ``OnFailure`` (workers:
  ``Never``), overwrites a pod template's own ``restartPolicy`` with it (Warning event
  ``SetPodTemplateRestartPolicy``), and refuses a job whose ``<name>-worker-<N-1>`` or
  ``<name>-launcher`` is not a DNS-1035 label (Warning event ``ValidationError``, no pods, no
  status ever);
- it creates worker pods, then (once they run) the launcher Job ``<name>-launcher`` with the
  replica's template and ``runPolicy.backoffLimit``; the Job controller makes the launcher pod
  (random suffix), each pod with what ``newWorker``/``newLauncherPodTemplate`` add: the
  ``<name>-ssh`` Secret at ``sshAuthMountPath`` (``setupSSHOnPod``: mode 0600 only at
  ``/root/.ssh``), the ``<name>-config`` ConfigMap at ``/etc/mpi`` on the launcher,
  ``K_MPI_JOB_ROLE``;
- the API server refuses a pod that breaks its namespace's Pod Security level (a namespace
  labelled ``pod-security.kubernetes.io/enforce: restricted``, see ``pod_security``), or one
  ``refuse_pods`` names (a quota): a ``FailedCreate`` Warning event on the launcher Job
  (``MPIJobFailed`` on the MPIJob for a worker) and no pod;
- the kubelet really runs the launcher's command locally and turns its output into the pod's
  log. With ``OnFailure`` a failed container restarts in place (training reruns from step 0)
  and once restarts exceed the backoff limit the Job controller deletes the pod, log and all;
  with ``Never`` a failed pod stays and a new one is made while the limit allows;
- suspending deletes the pods and suspends the launcher Job; resuming starts a pod from the
  launcher Job's *stored* template (or a new Job from the MPIJob's if it was deleted);
- deletions go through the emulator's garbage collector: pods on a node stay (with a
  ``deletionTimestamp``) until this kubelet has killed their process.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import math
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from kube_emulator import JOBS, MPIJOBS, NAMESPACES, NODES, PODS, PVCS, SECRETS, KubeEmulator, now_rfc3339
from pod_security import admission_error

# tests/support (pytest puts it on the path; bench/k8s_jobs.py, which imports this module, does not)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from mpi_env import MPI_ROOT_ENV

JOB_NAME = "training.kubeflow.org/job-name"
JOB_ROLE = "training.kubeflow.org/job-role"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
ROOT_SSH_PATH = "/root/.ssh"  # the operator's rootSSHPath
CONFIG_MOUNT_PATH = "/etc/mpi"
# The image's entrypoint (trainer/Dockerfile COPYs trainer/entrypoint.sh there): this kubelet runs
# the repository's copy, as root, where it only runs the command it is given.
IMAGE_FILES = {"/usr/local/bin/lanenb-entrypoint": os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "trainer", "entrypoint.sh")}
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def local_argv(argv: list[str]) -> list[str]:
    """The container's argv made runnable here: this interpreter, oversubscribed mpirun."""
    out = [IMAGE_FILES.get(a, a) for a in argv]
    if "mpirun" in out:  # run directly or by the launcher wrapper (lanenb_trainer.launcher -- mpirun ...)
        out.insert(out.index("mpirun") + 1, "--oversubscribe")
    for i in range(len(out) - 2):
        if out[i] == "python" and out[i + 1] == "-m":
            out[i] = sys.executable
    return out


def add_operator_parts(job: dict, pod_spec: dict, role: str) -> None:
    """What the operator adds to each pod template (``setupSSHOnPod``, the launcher's config volume,
    ``K_MPI_JOB_ROLE``), so that admission sees the pod the operator really creates."""
    name = job["metadata"]["name"]
    ssh_path = job["spec"].get("sshAuthMountPath") or ROOT_SSH_PATH
    secret: dict = {"secretName": f"{name}-ssh", "items": [
        {"key": "ssh-privatekey", "path": "id_rsa"}, {"key": "ssh-publickey", "path": "id_rsa.pub"},
        {"key": "ssh-publickey", "path": "authorized_keys"}]}
    if ssh_path == ROOT_SSH_PATH:
        secret["defaultMode"] = 0o600
    volumes = pod_spec.setdefault("volumes", [])
    volumes.append({"name": "ssh-auth", "secret": secret})
    container = pod_spec["containers"][0]
    mounts = container.setdefault("volumeMounts", [])
    mounts.append({"name": "ssh-auth", "mountPath": ssh_path})
    if role == "launcher":
        volumes.append({"name": "mpi-job-config", "configMap": {"name": f"{name}-config", "items": [
            {"key": "hostfile", "path": "hostfile", "mode": 0o444},
            {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}]}})
        mounts.append({"name": "mpi-job-config", "mountPath": CONFIG_MOUNT_PATH})
    container.setdefault("env", []).append({"name": "K_MPI_JOB_ROLE", "value": role})


def operator_validation_errors(job: dict) -> list[str]:
    """``validateMPIJobName`` + the replica checks of ``validateMPIJobSpec`` (after defaulting)."""
    errs = []
    replicas = job["spec"].get("mpiReplicaSpecs") or {}
    workers = max(int((replicas.get("Worker") or {}).get("replicas") or 1), 1)
    name = job["metadata"]["name"]
    for host in (f"{name}-worker-{workers - 1}", f"{name}-launcher"):
        if len(host) > 63 or not _DNS1035.match(host):
            errs.append(f"metadata.name: Invalid value: {name!r}: will not able to create pod and service with "
                        f"invalid DNS label {host!r}")
    for role, spec in replicas.items():
        if spec.get("restartPolicy") not in ("Never", "OnFailure"):
            errs.append(f"spec.mpiReplicaSpecs[{role}].restartPolicy: Unsupported value: {spec.get('restartPolicy')!r}")
    if (replicas.get("Launcher") or {}).get("replicas", 1) != 1:
        errs.append("spec.mpiReplicaSpecs[Launcher].replicas: Invalid value: must be 1")
    return errs


@dataclass
class FakeCluster:
    emulator: KubeEmulator
    nodes: int = 3
    gpus_per_node: int = 1
    unpullable_images: set[str] = field(default_factory=set)
    rewrite_argv: Callable[[list[str]], list[str]] = local_argv
    extra_env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    # pod body -> why the apiserver refuses to create it (quota, Pod Security), or None
    refuse_pods: Callable[[dict], str | None] | None = None
    stop_delay: float = 0.0  # seconds the kubelet takes to stop a deleted pod (its grace period)
    processes: dict[tuple[str, str], asyncio.subprocess.Process] = field(default_factory=dict)  # by MPIJob
    pod_processes: dict[tuple[str, str], asyncio.subprocess.Process] = field(default_factory=dict)  # by pod
    launched: list[list[str]] = field(default_factory=list)  # argv actually run, for assertions
    tasks: set[asyncio.Task] = field(default_factory=set)

    async def shutdown(self) -> None:
        """Kill every launcher and let its task reap it (closes the pipes inside the loop)."""
        for key in list(self.processes):
            self._kill(key)
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=5)

    def attach(self) -> FakeCluster:
        """Hook into the emulator and register the nodes the scheduler places pods on, with their
        allocatable GPUs, as a real cluster's API server lists them (call before the thread starts)."""
        if NODES in self.emulator.store:  # before the hook: no operator reaction to nodes
            for i in range(self.nodes):
                self.emulator.create(NODES, None, {"metadata": {"name": f"gpu-node-{i}", "labels": {
                    "kubernetes.io/hostname": f"gpu-node-{i}"}}, "status": {
                    "capacity": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(self.gpus_per_node)},
                    "allocatable": {"cpu": "8", "memory": "62Gi", "nvidia.com/gpu": str(self.gpus_per_node)}}})
        self.emulator.graceful_pods = True  # this kubelet confirms pod deletions
        self.emulator.hooks.append(self.on_event)
        return self

    # ------------------------------------------------------------------ helpers
    def _set_condition(self, ns: str, name: str, ctype: str, status: str, reason: str, message: str,
                       **extra: Any) -> None:
        self._set_conditions(ns, name, [(ctype, status, reason, message)], **extra)

    def _set_conditions(self, ns: str, name: str, updates: list[tuple[str, str, str, str]], **extra: Any) -> None:
        job = self.emulator.get(MPIJOBS, ns, name)
        if job is None:
            return
        st = job.get("status") or {}
        now = now_rfc3339()
        conds = list(st.get("conditions") or [])
        for ctype, status, reason, message in updates:
            conds = [c for c in conds if c["type"] != ctype]
            conds.append({"type": ctype, "status": status, "reason": reason, "message": message,
                          "lastTransitionTime": now, "lastUpdateTime": now})
        st["conditions"] = conds
        st.update(extra)
        self.emulator.replace(MPIJOBS, ns, name, {**job, "status": st}, status_only=True)

    def _pod_status(self, ns: str, pod: str, status: dict) -> None:
        obj = self.emulator.get(PODS, ns, pod)
        if obj is not None:
            self.emulator.replace(PODS, ns, pod, {**obj, "status": status}, status_only=True)

    def _event(self, ns: str, obj: dict | None, reason: str, message: str, component: str = "mpi-job-controller"
               ) -> None:
        if obj is not None:
            self.emulator.record_event(ns, obj, reason, message, component=component)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _create_pod(self, ns: str, body: dict, owner: dict) -> dict | None:
        """Create a pod, unless the apiserver refuses it (then a FailedCreate-style event, None)."""
        meta = body["metadata"]
        if not meta.get("name"):  # the apiserver names it before admission, so the refusal names it
            meta["name"] = meta["generateName"] + os.urandom(3).hex()[:5]
        why = (self.refuse_pods(body) if self.refuse_pods else None) or \
            admission_error(body, self.emulator.get(NAMESPACES, None, ns) if NAMESPACES in self.emulator.store
                            else None)
        if why:
            if owner.get("kind") == "Job":
                self._event(ns, owner, "FailedCreate", f"Error creating: {why}", component="job-controller")
            else:
                self._event(ns, owner, "MPIJobFailed", f"worker pod created failed: {why}")
            return None
        pod = self.emulator.create(PODS, ns, body)
        self._pod_status(ns, pod["metadata"]["name"], {"phase": "Pending"})
        return pod

    @staticmethod
    def _owner_ref(obj: dict) -> dict:
        return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
                "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}

    def _worker_body(self, job: dict, index: int) -> dict:
        meta = job["metadata"]
        template = copy.deepcopy(job["spec"]["mpiReplicaSpecs"]["Worker"]["template"])
        labels = {**(template.get("metadata") or {}).get("labels", {}), JOB_NAME: meta["name"], JOB_ROLE: "worker",
                  REPLICA_INDEX: str(index)}
        spec = template["spec"]
        spec["restartPolicy"] = job["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"]
        add_operator_parts(job, spec, "worker")
        return {"metadata": {"name": f"{meta['name']}-worker-{index}", "labels": labels,
                             "ownerReferences": [self._owner_ref(job)]}, "spec": spec}

    def _schedule(self, ns: str, pod: dict, free_gpus: list[int]) -> str | None:
        """Place the pod or return why it cannot run (sets the pod's status either way)."""
        name = pod["metadata"]["name"]
        for vol in pod["spec"].get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and self.emulator.get(PVCS, ns, claim) is None:
                msg = (f'0/{self.nodes} nodes are available: persistentvolumeclaim "{claim}" not found. '
                       "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
                self._pod_status(ns, name, {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}]})
                return msg
        want = sum(int((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu", 0))
                   for c in pod["spec"]["containers"])
        node = next((i for i, free in enumerate(free_gpus) if free >= want), None)
        if node is None:
            msg = (f"0/{self.nodes} nodes are available: {self.nodes} Insufficient nvidia.com/gpu. preemption: "
                   f"0/{self.nodes} nodes are available: {self.nodes} No preemption victims found for incoming pod.")
            self._pod_status(ns, name, {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}]})
            return msg
        free_gpus[node] -= want
        image = pod["spec"]["containers"][0]["image"]
        cname = pod["spec"]["containers"][0]["name"]
        if image in self.unpullable_images:
            self._pod_status(ns, name, {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True"}], "containerStatuses": [{
                    "name": cname, "image": image, "imageID": "", "ready": False, "restartCount": 0,
                    "state": {"waiting": {"reason": "ImagePullBackOff",
                                          "message": f'Back-off pulling image "{image}"'}}}]})
            return "image"
        self._pod_status(ns, name, {"phase": "Running", "startTime": now_rfc3339(), "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": cname, "image": image, "imageID": "", "ready": True, "restartCount": 0,
                                   "state": {"running": {"startedAt": now_rfc3339()}}}]})
        self.emulator.patch(PODS, ns, name, {"spec": {"nodeName": f"gpu-node-{node}"}})
        return None

    # ------------------------------------------------------------------ reactions
    async def on_event(self, kind: str, res: tuple, obj: dict) -> None:
        meta = obj["metadata"]
        if res == PODS:
            if kind == "MODIFIED" and meta.get("deletionTimestamp"):  # the kubelet stops the containers
                await asyncio.sleep(self.stop_delay)
                await self._stop_containers(obj, float(meta.get("deletionGracePeriodSeconds") or 0))
                self.emulator.finish_pod_deletion(meta["namespace"], meta["name"])
            elif kind == "DELETED":
                # force-deleted (node lost): what runs there dies now; a graceful deletion was stopped
                # above, and the ranks found now would be the launcher retry's
                if not meta.get("deletionTimestamp"):
                    await self._stop_containers(obj, 0.0)
                self._replace_worker(obj)  # the operator makes a missing worker again
            return
        if res != MPIJOBS:
            return
        key = (meta["namespace"], meta["name"])
        if kind == "ADDED":
            self._spawn(self.run_job(obj))
        elif kind == "DELETED":
            self._kill(key)
        elif kind == "MODIFIED" and not meta.get("deletionTimestamp"):
            suspend = bool((obj["spec"].get("runPolicy") or {}).get("suspend"))
            conds = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
            if suspend and conds.get("Suspended") != "True":
                self._suspend(obj)
            elif not suspend and conds.get("Suspended") == "True":
                self._set_condition(*key, "Suspended", "False", "MPIJobResumed", "MPIJob resumed")
                self._spawn(self.start(*key))

    async def _stop_containers(self, pod: dict, grace: float) -> None:
        """What the kubelet does to a pod being deleted: SIGTERM to each container's main process,
        SIGKILL to all that is left once it exits or ``grace`` seconds pass (``killContainer``).
        A worker here runs no process of its own: its ranks run under the launcher's mpirun, and
        they are its containers' processes. A worker whose main process is ``sshd`` loses them at
        once even with grace: sshd exits on SIGTERM, and when a PID namespace's init exits the
        kernel SIGKILLs every process left in it. One whose command is the worker init
        (``lanenb_trainer.worker_init``, what the manifests run) first has them checkpoint:
        ``_preempt_ranks`` does here what that init does in a real container (SIGUSR1 to the
        ranks, wait for them within its ``--grace``); the init itself, as a process tree, is
        tested in ``test_k8s_worker_init``."""
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        if grace > 0:
            await self._preempt_ranks(pod, grace)
        proc = self.pod_processes.pop((ns, name), None)
        if proc is not None and proc.returncode is None:
            if grace > 0:
                proc.send_signal(signal.SIGTERM)  # to the main process only, as the runtime does
                try:
                    await asyncio.wait_for(asyncio.shield(proc.wait()), grace)
                except asyncio.TimeoutError:
                    pass
            _killpg(proc)
            await proc.wait()
        for rank in self._ranks_on(pod):
            try:
                rank.kill()
            except psutil.Error:
                pass

    async def _preempt_ranks(self, pod: dict, grace: float) -> None:
        """The worker init's SIGTERM: SIGUSR1 to the pod's ranks, then wait until they exit or the
        init's ``--grace`` (bounded by the pod's) passes."""
        command = [str(a) for a in (pod["spec"]["containers"][0].get("command") or [])]
        if "lanenb_trainer.worker_init" not in command:
            return  # sshd as PID 1: nothing is signalled
        init_grace = float(command[command.index("--grace") + 1]) if "--grace" in command else 50.0
        ranks = self._ranks_on(pod)
        for rank in ranks:
            try:
                rank.send_signal(signal.SIGUSR1)
            except psutil.Error:
                pass
        deadline = asyncio.get_running_loop().time() + min(grace, init_grace)
        while ranks and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
            ranks = [r for r in ranks if _running(r)]

    def _ranks_on(self, pod: dict) -> list[psutil.Process]:
        """The rank processes mpirun placed on worker ``pod`` (``--map-by slot``: ``slotsPerWorker``
        each, in worker order), found under the MPIJob's launcher process."""
        labels = pod["metadata"].get("labels") or {}
        if labels.get(JOB_ROLE) != "worker":
            return []
        job_name, index = labels.get(JOB_NAME), int(labels.get(REPLICA_INDEX, 0))
        job = self.emulator.get(MPIJOBS, pod["metadata"]["namespace"], job_name) if job_name else None
        launcher = self.processes.get((pod["metadata"]["namespace"], job_name or ""))
        if job is None or launcher is None or launcher.returncode is not None:
            return []
        slots = int(job["spec"].get("slotsPerWorker") or 1)
        mine = {str(r) for r in range(index * slots, (index + 1) * slots)}
        found = []
        try:
            for child in psutil.Process(launcher.pid).children(recursive=True):
                try:
                    if child.environ().get("OMPI_COMM_WORLD_RANK") in mine:
                        found.append(child)
                except psutil.Error:
                    continue
        except psutil.Error:
            return []
        return found

    def _replace_worker(self, pod: dict) -> None:
        """``getOrCreateWorker``: a worker pod of a live MPIJob that is gone is created again
        (the real operator's informer sees the pod's deletion and re-syncs the job)."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        ns, job_name = meta["namespace"], labels.get(JOB_NAME)
        if labels.get(JOB_ROLE) != "worker" or not job_name or self._gone(ns, job_name):
            return
        job = self.emulator.get(MPIJOBS, ns, job_name)
        conds = {c["type"]: c["status"] for c in ((job or {}).get("status") or {}).get("conditions") or []}
        if job is None or "True" in (conds.get("Succeeded"), conds.get("Failed")):
            return
        index = int(labels.get(REPLICA_INDEX, 0))
        if self.emulator.get(PODS, ns, meta["name"]) is None:
            body = self._worker_body(job, index)
            created = self._create_pod(ns, body, job)
            if created is not None:
                self._schedule(ns, created, [self.gpus_per_node] * self.nodes)

    def _suspend(self, job: dict) -> None:
        """``runPolicy.suspend``: the launcher Job is suspended (the Job controller deletes its pods,
        with grace) and ``cleanUpWorkerPods`` deletes the workers (with grace)."""
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        launcher_job = self.emulator.get(JOBS, ns, f"{name}-launcher")
        if launcher_job is not None:
            self.emulator.patch(JOBS, ns, f"{name}-launcher", {"spec": {"suspend": True}})
        for pod in self.emulator.list(PODS, ns, f"{JOB_NAME}={name}"):
            self.emulator.delete(PODS, ns, pod["metadata"]["name"])
        self._set_condition(ns, name, "Running", "False", "MPIJobSuspended", "MPIJob suspended")
        self._set_condition(ns, name, "Suspended", "True", "MPIJobSuspended", f"MPIJob {ns}/{name} is suspended.")

    def _kill(self, key: tuple[str, str]) -> None:
        proc = self.processes.pop(key, None)
        if proc is not None and proc.returncode is None:
            _killpg(proc)

    def _gone(self, ns: str, name: str) -> bool:
        """Deleted, being deleted or suspended: the operator stops working on it."""
        current = self.emulator.get(MPIJOBS, ns, name)
        return (current is None or bool(current["metadata"].get("deletionTimestamp"))
                or bool((current["spec"].get("runPolicy") or {}).get("suspend")))

    async def run_job(self, job: dict) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        await asyncio.sleep(0)
        replicas = job["spec"].get("mpiReplicaSpecs") or {}
        replicas.get("Launcher", {}).setdefault("restartPolicy", "OnFailure")  # the operator's defaults
        replicas.get("Worker", {}).setdefault("restartPolicy", "Never")
        errors = operator_validation_errors(job)
        if errors:  # recorded, not requeued: the job never gets a status or a pod
            self._event(ns, job, "ValidationError", "Found validation errors: " + ", ".join(errors))
            return
        if (replicas.get("Launcher", {}).get("template", {}).get("spec") or {}).get("restartPolicy"):
            self._event(ns, job, "SetPodTemplateRestartPolicy",
                        "Restart policy in pod template overridden by restart policy in replica spec")
        self._set_condition(ns, name, "Created", "True", "MPIJobCreated", f"MPIJob {ns}/{name} is created.")
        await self.start(ns, name, defaulted=job)

    async def start(self, ns: str, name: str, defaulted: dict | None = None) -> None:
        """Workers, then the launcher Job (existing: its stored template; else from the MPIJob)."""
        current = self.emulator.get(MPIJOBS, ns, name)
        if current is None or self._gone(ns, name):
            return
        job = copy.deepcopy(defaulted) if defaulted is not None else current
        job["metadata"] = current["metadata"]
        replicas = job["spec"]["mpiReplicaSpecs"]
        replicas["Launcher"].setdefault("restartPolicy", "OnFailure")
        replicas.get("Worker", {}).setdefault("restartPolicy", "Never")
        free = [self.gpus_per_node] * self.nodes
        blocked = False
        for i in range(replicas["Worker"]["replicas"]):
            pod = (self.emulator.get(PODS, ns, f"{name}-worker-{i}")
                   or self._create_pod(ns, self._worker_body(job, i), job))
            if pod is None:
                return  # refused: the event says why; the operator would retry later
            if self._schedule(ns, pod, free) is not None:
                blocked = True
        if blocked:
            return  # WaitForWorkersReady: no launcher until every worker runs
        launcher_job = self.emulator.get(JOBS, ns, f"{name}-launcher")
        if launcher_job is None:
            template = copy.deepcopy(replicas["Launcher"]["template"])
            template["spec"]["restartPolicy"] = replicas["Launcher"]["restartPolicy"]  # replica's wins
            add_operator_parts(job, template["spec"], "launcher")
            launcher_job = self.emulator.create(JOBS, ns, {
                "metadata": {"name": f"{name}-launcher", "ownerReferences": [self._owner_ref(current)]},
                "spec": {"backoffLimit": (job["spec"].get("runPolicy") or {}).get("backoffLimit", 6),
                         "template": template}})
        else:
            launcher_job = self.emulator.patch(JOBS, ns, f"{name}-launcher", {"spec": {"suspend": False}})
        await self.run_launcher(ns, name, launcher_job)

    async def _secret_env(self, ns: str, container: dict, wait: float = 10.0) -> dict[str, str]:
        """What the kubelet puts in the environment for ``valueFrom.secretKeyRef`` entries: the key of
        the Secret in the pod's namespace (base64 ``data``). Like the real kubelet, which holds the
        container in CreateContainerConfigError until the Secret exists, it waits for a missing one
        (``wait`` seconds here; then the variable is left out)."""
        out: dict[str, str] = {}
        deadline = asyncio.get_running_loop().time() + wait
        for entry in container.get("env") or []:
            ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
            while ref:
                secret = self.emulator.get(SECRETS, ns, ref["name"]) if SECRETS in self.emulator.store else None
                value = ((secret or {}).get("data") or {}).get(ref["key"])
                if value is not None:
                    out[entry["name"]] = base64.b64decode(value).decode()
                    break
                if asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.05)
        return out

    async def _exec(self, ns: str, name: str, pod_name: str, container: dict) -> int:
        argv = self.rewrite_argv(list(container.get("command") or []) + list(container.get("args") or []))
        self.launched.append(argv)
        env = {**os.environ, **{e["name"]: e["value"] for e in container.get("env") or [] if "value" in e},
               **(await self._secret_env(ns, container)),
               **MPI_ROOT_ENV,
               "OMPI_MCA_rmaps_base_oversubscribe": "1", **self.extra_env}
        log = self.emulator.pod_log(ns, pod_name, container["name"])
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
                cwd=self.workdir, start_new_session=True)
        except OSError as exc:
            log.append(f"exec failed: {exc}")
            return 127
        self.processes[(ns, name)] = proc
        self.pod_processes[(ns, pod_name)] = proc
        assert proc.stdout is not None
        async for raw in proc.stdout:
            log.append(raw.decode(errors="replace").rstrip("\n"))
        rc = await proc.wait()
        self.processes.pop((ns, name), None)
        self.pod_processes.pop((ns, pod_name), None)
        return rc

    async def run_launcher(self, ns: str, name: str, launcher_job: dict) -> None:
        """The Job controller and the kubelet for the launcher Job, until it succeeds or fails."""
        template = launcher_job["spec"]["template"]
        restart = template["spec"].get("restartPolicy", "Never")
        backoff = int(launcher_job["spec"].get("backoffLimit") or 0)
        labels = {**(template.get("metadata") or {}).get("labels", {}), JOB_NAME: name, JOB_ROLE: "launcher"}
        failures = 0
        while True:
            pod = self._create_pod(ns, {"metadata": {"generateName": f"{name}-launcher-", "labels": labels,
                                                     "ownerReferences": [self._owner_ref(launcher_job)]},
                                        "spec": copy.deepcopy(template["spec"])}, launcher_job)
            if pod is None:
                return
            lname = pod["metadata"]["name"]
            if self._schedule(ns, pod, [math.inf] * self.nodes) is not None:  # type: ignore[list-item]
                return
            self._set_condition(ns, name, "Running", "True", "MPIJobRunning", f"MPIJob {ns}/{name} is running.",
                                startTime=now_rfc3339())
            container = pod["spec"]["containers"][0]
            rc = await self._exec(ns, name, lname, container)
            restarts = 0
            while rc != 0 and restart == "OnFailure" and not self._gone(ns, name):
                failures += 1
                restarts += 1  # the kubelet restarts the container in place: training from step 0 again
                self._pod_status(ns, lname, {"phase": "Running", "containerStatuses": [{
                    "name": container["name"], "image": container["image"], "ready": True, "restartCount": restarts,
                    "state": {"running": {"startedAt": now_rfc3339()}},
                    "lastState": {"terminated": {"exitCode": rc, "reason": "Error"}}}]})
                if failures > backoff:  # the Job controller notices: it deletes the pod, log and all
                    log = self.emulator.pod_log(ns, lname, container["name"])
                    before = len(log.lines)
                    rerun = asyncio.get_running_loop().create_task(self._exec(ns, name, lname, container))
                    for _ in range(200):  # until the rerun has started writing (or ended)
                        if len(log.lines) > before or rerun.done():
                            break
                        await asyncio.sleep(0.05)
                    self.emulator.delete(PODS, ns, lname)
                    await rerun
                    self._fail(ns, name, launcher_job, "BackoffLimitExceeded", "Job has reached the specified "
                               "backoff limit")
                    return
                rc = await self._exec(ns, name, lname, container)
            self.emulator.pod_log(ns, lname, container["name"]).close()
            if self._gone(ns, name):
                return  # deleted or suspended while running
            # A SIGKILLed container stands for the OOM killer; one that exits 137 itself (the launcher
            # wrapper after mpirun lost a SIGKILLed rank) is an Error, as the kubelet reports it.
            reason = "OOMKilled" if rc == -signal.SIGKILL else ("Completed" if rc == 0 else "Error")
            exit_code = 137 if rc < 0 else rc
            self._pod_status(ns, lname, {"phase": "Succeeded" if rc == 0 else "Failed", "containerStatuses": [{
                "name": container["name"], "image": container["image"], "imageID": "", "ready": False,
                "restartCount": restarts,
                "state": {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": now_rfc3339()}}}]})
            if rc == 0:
                self._finish(ns, name, ("Succeeded", "MPIJobSucceeded", f"MPIJob {ns}/{name} successfully completed."))
                return
            failures += 1
            if failures > backoff:
                self._fail(ns, name, launcher_job, "BackoffLimitExceeded" if backoff else "MPIJobFailed",
                           f"MPIJob {ns}/{name} has failed: launcher {reason} (exit code {exit_code})")
                return
            # Never + backoff left: the Job controller makes a new pod; the failed one stays

    def _fail(self, ns: str, name: str, launcher_job: dict, reason: str, message: str) -> None:
        self._event(ns, self.emulator.get(MPIJOBS, ns, name), reason, message)
        self._finish(ns, name, ("Failed", reason, message))

    def _finish(self, ns: str, name: str, final: tuple[str, str, str]) -> None:
        job = self.emulator.get(MPIJOBS, ns, name)
        if job is None:
            return
        policy = (job["spec"].get("runPolicy") or {}).get("cleanPodPolicy", "None")
        if policy in ("Running", "All"):
            for pod in self.emulator.list(PODS, ns, f"{JOB_NAME}={name},{JOB_ROLE}=worker"):
                self.emulator.delete(PODS, ns, pod["metadata"]["name"])
        # One status update, as the operator's reconcile loop does: Running off, Succeeded/Failed on.
        self._set_conditions(ns, name, [("Running", "False", "MPIJobRunning", "launcher finished"),
                                        (final[0], "True", final[1], final[2])], completionTime=now_rfc3339())


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _killpg(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
