"""A test-only Job controller + kubelet for ``batch/v1`` Jobs inside the Kubernetes emulator.

When a Job is created it does what the real pieces do, in miniature: one pod labelled
``job-name=<job>``, Pending/Unschedulable when a mounted PVC does not exist; otherwise the
container's command really runs here (``python`` -> this interpreter, paths under a PVC's mount
path -> a local folder standing for that PVC), its output becomes the pod's log, and the exit
code becomes the pod phase and the Job's ``Complete``/``Failed`` condition. The pod is placed on a
node, so a deletion (a cancel: Foreground deletion of the Job) only marks it until its kubelet,
here the ``cluster`` fixture's fake one, confirms; the fetcher process is killed at the mark.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kube_emulator import JOBS, PODS, PVCS, SECRETS, KubeEmulator, now_rfc3339

FETCH_LABEL = ("app.kubernetes.io/name", "lanenb-fetch")  # the Jobs this controller runs


@dataclass
class FakeJobController:
    emulator: KubeEmulator
    volumes: Path  # <volumes>/<namespace>/<claim> stands for each PVC
    launched: list[list[str]] = field(default_factory=list)
    tasks: set = field(default_factory=set)
    processes: dict = field(default_factory=dict)  # (namespace, pod) -> the running fetcher

    def attach(self) -> FakeJobController:
        """Call on the emulator's loop (``thread.call(controller.attach)``)."""
        if JOBS not in self.emulator.store:
            self.emulator.install(JOBS)
        self.emulator.hooks.append(self.on_event)
        return self

    async def on_event(self, kind: str, res: tuple, obj: dict) -> None:
        labels = obj["metadata"].get("labels") or {}
        if res == PODS and kind == "MODIFIED" and obj["metadata"].get("deletionTimestamp"):
            proc = self.processes.pop((obj["metadata"]["namespace"], obj["metadata"]["name"]), None)
            if proc is not None and proc.returncode is None:
                proc.kill()  # the kubelet stops the container of a pod being deleted
            return
        if res == JOBS and kind == "ADDED" and labels.get(FETCH_LABEL[0]) == FETCH_LABEL[1]:
            task = asyncio.get_running_loop().create_task(self.run(obj))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _job_status(self, ns: str, name: str, status: dict) -> None:
        job = self.emulator.get(JOBS, ns, name)
        if job is not None and not job["metadata"].get("deletionTimestamp"):  # no outcome for a deleted Job
            self.emulator.replace(JOBS, ns, name, {**job, "status": status}, status_only=True)

    def _pod_status(self, ns: str, name: str, status: dict) -> None:
        pod = self.emulator.get(PODS, ns, name)
        if pod is not None:
            self.emulator.replace(PODS, ns, name, {**pod, "status": status}, status_only=True)

    async def _env(self, ns: str, pod: str, container: dict) -> dict[str, str]:
        """The container's variables as the kubelet sets them: ``value``, or a Secret's key
        (``valueFrom.secretKeyRef``), waited for as the kubelet retries a missing Secret."""
        import base64

        out: dict[str, str] = {}
        for e in container.get("env") or []:
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                out[e["name"]] = e.get("value", "")
                continue
            for _ in range(100):
                secret = self.emulator.get(SECRETS, ns, ref["name"])
                if secret is not None:
                    break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError(f"pod {pod}: Secret {ref['name']!r} not found (CreateContainerConfigError)")
            out[e["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        return out

    async def run(self, job: dict) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        await asyncio.sleep(0)
        template = job["spec"]["template"]
        pod = self.emulator.create(PODS, ns, {"metadata": {
            "generateName": f"{name}-", "labels": {**template["metadata"].get("labels", {}), "job-name": name},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                 "uid": job["metadata"]["uid"], "controller": True}]},
            "spec": {**template["spec"], "nodeName": "node-0"}})
        pname = pod["metadata"]["name"]
        self._job_status(ns, name, {"active": 1, "startTime": now_rfc3339()})
        container = template["spec"]["containers"][0]
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in template["spec"].get("volumes") or []
                  if "persistentVolumeClaim" in v}
        mounts: dict[str, Path] = {}
        for m in container.get("volumeMounts") or []:
            claim = claims.get(m["name"])
            if claim is None:
                continue
            if self.emulator.get(PVCS, ns, claim) is None:
                self._pod_status(ns, pname, {"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": f'persistentvolumeclaim "{claim}" not found'}]})
                return
            mounts[m["mountPath"].rstrip("/")] = self.volumes / ns / claim
        for local in mounts.values():
            local.mkdir(parents=True, exist_ok=True)
        argv = [self._local(a, mounts) for a in container["command"] + container.get("args", [])]
        if argv[0] == "python":
            argv[0] = sys.executable
        self.launched.append(argv)
        self._pod_status(ns, pname, {"phase": "Running", "startTime": now_rfc3339()})
        env = {**os.environ, **await self._env(ns, pname, container)}
        log = self.emulator.pod_log(ns, pname, container["name"])
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT, env=env)
        self.processes[(ns, pname)] = proc
        assert proc.stdout is not None
        async for raw in proc.stdout:
            log.append(raw.decode(errors="replace").rstrip("\n"))
        rc = await proc.wait()
        log.close()
        self._pod_status(ns, pname, {"phase": "Succeeded" if rc == 0 else "Failed", "containerStatuses": [{
            "name": container["name"], "image": container["image"], "imageID": "", "ready": False,
            "restartCount": 0, "state": {"terminated": {"exitCode": rc, "finishedAt": now_rfc3339()}}}]})
        now = now_rfc3339()
        if rc == 0:
            cond = {"type": "Complete", "status": "True", "lastTransitionTime": now}
            self._job_status(ns, name, {"succeeded": 1, "completionTime": now, "conditions": [cond]})
        else:  # one pod is enough for the test: the backoff limit is "reached" at once
            cond = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit", "lastTransitionTime": now}
            self._job_status(ns, name, {"failed": 1, "conditions": [cond]})

    @staticmethod
    def _local(arg: str, mounts: dict[str, Path]) -> str:
        for mount, local in mounts.items():
            if arg == mount or arg.startswith(mount + "/"):
                return str(local) + arg[len(mount):]
        return arg
