"""A test-only MPI Operator + scheduler + kubelet living inside the emulator's event loop.

When an MPIJob is created it does what the real pieces do, in miniature: the operator
creates worker pods and (once workers run) a launcher pod with the operator's labels and a
random suffix; the scheduler places pods on fake GPU nodes (or leaves them Unschedulable),
checks PVCs and "pulls" images; the kubelet really runs the launcher's command locally,
turns its output into the launcher pod's log and the exit code into pod/MPIJob status.
Suspend and delete kill the process.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from kube_emulator import MPIJOBS, NODES, PODS, PVCS, KubeEmulator, now_rfc3339

JOB_NAME = "training.kubeflow.org/job-name"
JOB_ROLE = "training.kubeflow.org/job-role"
REPLICA_INDEX = "training.kubeflow.org/replica-index"


def local_argv(argv: list[str]) -> list[str]:
    """The container's argv made runnable here: this interpreter, oversubscribed mpirun."""
    out = list(argv)
    if out and out[0] == "mpirun":
        out.insert(1, "--oversubscribe")
    for i in range(len(out) - 2):
        if out[i] == "python" and out[i + 1] == "-m":
            out[i] = sys.executable
    return out


@dataclass
class FakeCluster:
    emulator: KubeEmulator
    nodes: int = 3
    gpus_per_node: int = 1
    unpullable_images: set[str] = field(default_factory=set)
    rewrite_argv: Callable[[list[str]], list[str]] = local_argv
    extra_env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    processes: dict[tuple[str, str], asyncio.subprocess.Process] = field(default_factory=dict)
    launched: list[list[str]] = field(default_factory=list)  # argv actually run, for assertions
    tasks: set[asyncio.Task] = field(default_factory=set)

    async def shutdown(self) -> None:
        """Kill every launcher and let its task reap it (closes the pipes inside the loop)."""
        for key in list(self.processes):
            self._kill(key)
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=5)

    def attach(self) -> "FakeCluster":
        """Hook into the emulator and register the nodes the scheduler places pods on, with their
        allocatable GPUs, as a real cluster's API server lists them (call before the thread starts)."""
        if NODES in self.emulator.store:  # before the hook: no operator reaction to nodes
            for i in range(self.nodes):
                self.emulator.create(NODES, None, {"metadata": {"name": f"gpu-node-{i}", "labels": {
                    "kubernetes.io/hostname": f"gpu-node-{i}"}}, "status": {
                    "capacity": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(self.gpus_per_node)},
                    "allocatable": {"cpu": "8", "memory": "62Gi", "nvidia.com/gpu": str(self.gpus_per_node)}}})
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

    def _make_pod(self, job: dict, role: str, index: int | None) -> dict:
        meta = job["metadata"]
        replica = job["spec"]["mpiReplicaSpecs"]["Launcher" if role == "launcher" else "Worker"]
        template = replica["template"]
        labels = {**(template.get("metadata") or {}).get("labels", {}), JOB_NAME: meta["name"], JOB_ROLE: role}
        pod_meta: dict[str, Any] = {
            "labels": labels,
            "ownerReferences": [{"apiVersion": job["apiVersion"], "kind": "MPIJob", "name": meta["name"],
                                 "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
        }
        if role == "launcher":
            pod_meta["generateName"] = f"{meta['name']}-launcher-"
        else:
            pod_meta["name"] = f"{meta['name']}-worker-{index}"
            labels[REPLICA_INDEX] = str(index)
        pod = self.emulator.create(PODS, meta["namespace"], {"metadata": pod_meta, "spec": template["spec"]})
        self._pod_status(meta["namespace"], pod["metadata"]["name"], {"phase": "Pending"})
        return pod

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
        if res != MPIJOBS:
            return
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        if kind == "ADDED":
            task = asyncio.get_running_loop().create_task(self.run_job(obj))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif kind == "DELETED":
            self._kill(key)
        elif kind == "MODIFIED" and (obj["spec"].get("runPolicy") or {}).get("suspend"):
            conds = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
            if conds.get("Suspended") != "True":
                self._kill(key)
                for pod in self.emulator.list(PODS, meta["namespace"], f"{JOB_NAME}={meta['name']}"):
                    self.emulator.delete(PODS, meta["namespace"], pod["metadata"]["name"])
                self._set_condition(*key, "Running", "False", "MPIJobSuspended", "MPIJob suspended")
                self._set_condition(*key, "Suspended", "True", "MPIJobSuspended",
                                    f"MPIJob {key[0]}/{key[1]} is suspended.")

    def _kill(self, key: tuple[str, str]) -> None:
        proc = self.processes.pop(key, None)
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def run_job(self, job: dict) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        await asyncio.sleep(0)
        self._set_condition(ns, name, "Created", "True", "MPIJobCreated", f"MPIJob {ns}/{name} is created.")
        workers = job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
        free = [self.gpus_per_node] * self.nodes
        blocked = False
        for i in range(workers):
            pod = self._make_pod(job, "worker", i)
            if self._schedule(ns, pod, free) is not None:
                blocked = True
        if blocked:
            return  # WaitForWorkersReady: no launcher until every worker runs
        launcher = self._make_pod(job, "launcher", None)
        lname = launcher["metadata"]["name"]
        if self._schedule(ns, launcher, [math.inf] * self.nodes) is not None:  # type: ignore[list-item]
            return
        self._set_condition(ns, name, "Running", "True", "MPIJobRunning", f"MPIJob {ns}/{name} is running.",
                            startTime=now_rfc3339())
        container = launcher["spec"]["containers"][0]
        argv = self.rewrite_argv(list(container.get("command") or []) + list(container.get("args") or []))
        self.launched.append(argv)
        env = {**os.environ, **{e["name"]: e.get("value", "") for e in container.get("env") or []},
               "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
               "OMPI_MCA_rmaps_base_oversubscribe": "1", **self.extra_env}
        log = self.emulator.pod_log(ns, lname, container["name"])
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
                cwd=self.workdir, start_new_session=True)
        except OSError as exc:
            log.append(f"exec failed: {exc}")
            rc = 127
        else:
            self.processes[(ns, name)] = proc
            assert proc.stdout is not None
            async for raw in proc.stdout:
                log.append(raw.decode(errors="replace").rstrip("\n"))
            rc = await proc.wait()
            self.processes.pop((ns, name), None)
        log.close()
        current = self.emulator.get(MPIJOBS, ns, name)
        if current is None or (current["spec"].get("runPolicy") or {}).get("suspend"):
            return  # deleted or suspended while running
        if rc in (-signal.SIGKILL, 137):
            reason = "OOMKilled"
        else:
            reason = "Completed" if rc == 0 else "Error"
        exit_code = 137 if rc < 0 else rc
        self._pod_status(ns, lname, {"phase": "Succeeded" if rc == 0 else "Failed", "containerStatuses": [{
            "name": container["name"], "image": container["image"], "imageID": "", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": exit_code, "reason": reason, "finishedAt": now_rfc3339()}}}]})
        policy = (job["spec"].get("runPolicy") or {}).get("cleanPodPolicy", "Running")
        if policy in ("Running", "All"):
            for pod in self.emulator.list(PODS, ns, f"{JOB_NAME}={name},{JOB_ROLE}=worker"):
                self.emulator.delete(PODS, ns, pod["metadata"]["name"])
        # One status update, as the operator's reconcile loop does: Running off, Succeeded/Failed on.
        if rc == 0:
            final = ("Succeeded", "MPIJobSucceeded", f"MPIJob {ns}/{name} successfully completed.")
        else:
            final = ("Failed", "MPIJobFailed", f"MPIJob {ns}/{name} has failed: launcher {reason} (exit code {exit_code})")
        self._set_conditions(ns, name, [("Running", "False", "MPIJobRunning", "launcher finished"),
                                        (final[0], "True", final[1], final[2])], completionTime=now_rfc3339())
