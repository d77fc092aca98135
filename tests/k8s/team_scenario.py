"""A team's cluster in the emulator, for the team-view tests and ``bench/team_view.py``: several
users' MPIJobs as the MPI Operator and the scheduler leave them (running ones on nodes with a
launcher log of ``@lanenb`` events, pending ones with the scheduler's, a quota's or the kubelet's
reason), GPU nodes, a ResourceQuota, and RBAC identities (``LEAD`` reads everything and may stop
any job, ``ALICE`` reads and stops in ``team-a`` only, ``VIEWER`` reads everything, stops nothing).

Objects are written straight into the emulator's store (no fake operator, no processes): the
team view only reads, so what matters is that the objects are what a cluster holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kube_emulator import MPIJOBS, NODES, PODS, QUOTAS, EmulatorThread, Rule, now_rfc3339

LEAD, ALICE, VIEWER = "lead", "alice", "viewer"
READ = "get list watch"
READ_ALL = "mpijobs pods pods/log events resourcequotas nodes"
RBAC = {
    LEAD: [Rule.of("*", "*")],
    VIEWER: [Rule.of(READ, READ_ALL)],
    ALICE: [Rule.of(READ, "mpijobs pods pods/log events resourcequotas", "team-a"),
            Rule.of("delete", "mpijobs", "team-a")],
}
JOB_NAME, JOB_ROLE = "training.kubeflow.org/job-name", "training.kubeflow.org/job-role"


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def mpijob(ns: str, name: str, user: str | None, *, workers: int = 2, gpus: int = 1, conditions: tuple = ("Created",),
           started: float | None = None, deadline_s: int | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "lanenb", "app.kubernetes.io/instance": name}
    annotations = {"lanenb/spec-processes": str(workers * max(gpus, 1))}
    if user is not None:
        labels["lanenb.io/user"] = user
        annotations["lanenb.io/user"] = user
    run_policy: dict[str, Any] = {"cleanPodPolicy": "Running"}
    if deadline_s is not None:
        run_policy["activeDeadlineSeconds"] = deadline_s
    worker = {"containers": [{"name": "worker", "image": "img:1",
                              "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}}]}
    status: dict[str, Any] = {"conditions": [{"type": c, "status": "True", "lastTransitionTime": now_rfc3339()}
                                             for c in conditions]}
    if started is not None:
        status["startTime"] = _rfc3339(started)
    if "Succeeded" in conditions:
        status["completionTime"] = now_rfc3339()
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"slotsPerWorker": max(gpus, 1), "runPolicy": run_policy,
                     "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                         {"name": "launcher", "image": "img:1"}]}}},
                         "Worker": {"replicas": workers, "template": {"spec": worker}}}},
            "status": status}


def pod(name: str, job: str, role: str, *, gpus: int = 0, node: str | None = None, phase: str = "Running",
        unschedulable: str | None = None, waiting: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": unschedulable}]
    if waiting:
        status["containerStatuses"] = [{"name": role, "image": "registry.example.com/typo:1", "ready": False,
                                        "state": {"waiting": {"reason": waiting, "message": "Back-off pulling"}}}]
    spec: dict[str, Any] = {"containers": [{"name": role, "image": "img:1",
                                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": {JOB_NAME: job, JOB_ROLE: role}}, "spec": spec, "status": status}


def event_line(kind: str, t: float, **fields: Any) -> str:
    """A rank-0 ``@lanenb`` event as the launcher's log holds it (``--tag-output``)."""
    return "[1,0]<stdout>:@lanenb " + json.dumps({"kind": kind, "rank": 0, "t": t, **fields})


INSUFFICIENT = ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: "
                "2 No preemption victims found for incoming pod.")
QUOTA_MSG = ('worker pod created failed: pods "b-quota-worker-0" is forbidden: exceeded quota: gpu-quota, requested: '
             "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2")


def _running(thread: EmulatorThread, ns: str, name: str, user: str, node: str, *, started: float,
             deadline_s: int | None = None, log: list[str] | None = None) -> None:
    e = thread.emulator
    thread.call(e.create, MPIJOBS, ns, mpijob(ns, name, user, conditions=("Created", "Running"), started=started,
                                              deadline_s=deadline_s))
    for i in range(2):
        thread.call(e.create, PODS, ns, pod(f"{name}-worker-{i}", name, "worker", gpus=1, node=node))
    thread.call(e.create, PODS, ns, pod(f"{name}-launcher-x1", name, "launcher", node=node))
    for line in log or []:
        thread.call(lambda text=line: e.pod_log(ns, f"{name}-launcher-x1", "launcher").append(text))


def build_team(thread: EmulatorThread) -> None:
    """team-a: alice's running job (progress 50%, GPUs 87%), carol's waiting for GPUs, alice's
    finished one; team-b: bob's running job (deadline in an hour), bob's refused by the quota,
    dave's whose image cannot be pulled. Two nodes of 2 GPUs, all allocated."""
    e = thread.emulator
    now = time.time()
    for i in range(2):
        thread.call(e.create, NODES, None, {"metadata": {"name": f"gpu-node-{i}"}, "status": {
            "allocatable": {"cpu": "8", "nvidia.com/gpu": "2"}, "capacity": {"nvidia.com/gpu": "2"}}})
    log = [event_line("start", now - 600, world_size=2, total_steps=100, config={"batch_size": 8}),
           event_line("step", now - 300, step=25, epoch=0, total_steps=100, loss=0.5),
           event_line("system", now - 200, gpu_util=87.0),
           event_line("step", now - 60, step=50, epoch=0, total_steps=100, loss=0.4),
           event_line("epoch", now - 50, epoch=0, val_accuracy=0.91, val_fp=0.1, val_fn=0.1)]
    _running(thread, "team-a", "a-run", ALICE, "gpu-node-0", started=now - 600, log=log)
    thread.call(e.create, MPIJOBS, "team-a", mpijob("team-a", "a-wait", "carol", gpus=2))
    for i in range(2):
        thread.call(e.create, PODS, "team-a", pod(f"a-wait-worker-{i}", "a-wait", "worker", gpus=2, phase="Pending",
                                                  unschedulable=INSUFFICIENT))
    thread.call(e.create, MPIJOBS, "team-a", mpijob("team-a", "a-done", ALICE, conditions=("Created", "Succeeded"),
                                                    started=now - 7200))
    _running(thread, "team-b", "b-run", "bob", "gpu-node-1", started=now - 600, deadline_s=4200)
    job = thread.call(e.create, MPIJOBS, "team-b", mpijob("team-b", "b-quota", "bob"))
    thread.call(e.record_event, "team-b", job, "MPIJobFailed", QUOTA_MSG)
    thread.call(e.create, QUOTAS, "team-b", {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {
        "requests.nvidia.com/gpu": "2"}}, "status": {"hard": {"requests.nvidia.com/gpu": "2"},
                                                     "used": {"requests.nvidia.com/gpu": "2"}}})
    thread.call(e.create, MPIJOBS, "team-b", mpijob("team-b", "b-image", "dave", workers=1, gpus=0))
    thread.call(e.create, PODS, "team-b", pod("b-image-worker-0", "b-image", "worker", phase="Pending",
                                              waiting="ImagePullBackOff"))


def build_many(thread: EmulatorThread, jobs: int, namespaces: int, *, users: int = 8) -> None:
    """``jobs`` MPIJobs over ``namespaces`` namespaces: a third running (2 GPU workers and a
    launcher each), the rest pending for GPUs; 16 nodes of 8 GPUs."""
    e = thread.emulator
    for i in range(16):
        thread.call(e.create, NODES, None, {"metadata": {"name": f"gpu-node-{i}"}, "status": {
            "allocatable": {"nvidia.com/gpu": "8"}}})

    def fill() -> None:
        now = time.time()
        for i in range(jobs):
            ns, name, user = f"team-{i % namespaces}", f"job-{i:04d}", f"user-{i % users}"
            if i % 3 == 0:
                e.create(MPIJOBS, ns, mpijob(ns, name, user, conditions=("Created", "Running"), started=now - 60))
                for w in range(2):
                    e.create(PODS, ns, pod(f"{name}-worker-{w}", name, "worker", gpus=1, node=f"gpu-node-{i % 16}"))
                e.create(PODS, ns, pod(f"{name}-launcher-x1", name, "launcher", node=f"gpu-node-{i % 16}"))
            else:
                e.create(MPIJOBS, ns, mpijob(ns, name, user))
                e.create(PODS, ns, pod(f"{name}-worker-0", name, "worker", gpus=1, phase="Pending",
                                       unschedulable=INSUFFICIENT))

    thread.call(fill)


def kubeconfig_for(thread: EmulatorThread, tmp: Path, user: str, namespace: str = "team-a") -> Path:
    """A kubeconfig whose token is ``user``'s (``emulator.tokens`` maps it back)."""
    return thread.write_kubeconfig(tmp / f"kubeconfig-{user}", token=f"token-{user}", namespace=namespace)


def enable_rbac(thread: EmulatorThread) -> None:
    thread.emulator.tokens = {f"token-{u}": u for u in RBAC}
    thread.emulator.rbac = RBAC


@contextmanager
def team_cluster(*, rbac: bool = True) -> Iterator[EmulatorThread]:
    """The emulator serving :func:`build_team`'s cluster (RBAC on unless ``rbac=False``), and
    afterwards the shared team collector closed and the emulator stopped."""
    from k8s_harness import start_emulator

    from lanenb.team import close_shared

    thread = start_emulator()
    thread.emulator.install(QUOTAS)
    thread.start()
    try:
        build_team(thread)
        if rbac:
            enable_rbac(thread)
        yield thread
    finally:
        close_shared()
        thread.stop()

