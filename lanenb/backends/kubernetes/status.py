"""MPIJob conditions + pod states -> ``JobStatus`` with a reason a person can act on.

The operator's conditions say *that* a job is stuck; the pods say *why* (no GPU left,
image cannot be pulled, missing volume claim, out of memory). We read both.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from lanenb.contract.status import JobState, JobStatus
from lanenb.kube.events import event_problem
from lanenb.kube.pods import JOB_ROLE_LABEL, parse_time, pod_problem, pod_state
from lanenb_trainer import exitcodes

__all__ = ["mpijob_status", "missing_status"]

def _conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type"): c for c in (job.get("status") or {}).get("conditions") or [] if c.get("type")}


def _true(conds: dict[str, dict[str, Any]], kind: str) -> bool:
    return str(conds.get(kind, {}).get("status")) == "True"


def _launcher_exit(pods: Iterable[dict[str, Any]]) -> int | None:
    """The exit code of the newest launcher pod that ended (the launcher Job's retries leave
    the older ones)."""
    launchers = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(JOB_ROLE_LABEL) == "launcher"]
    launchers.sort(key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    for pod in reversed(launchers):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated")
            if term and term.get("exitCode") is not None:
                return int(term["exitCode"])
    return None


def _retries(pods: Iterable[dict[str, Any]]) -> str | None:
    """What the launcher Job's retries cost so far, in words (None: none yet): the launcher pods
    that ended non-zero before the newest one (``restartPolicy: Never`` keeps each with its exit
    code). A retry continues from the run's last checkpoint; the steps that cost are in the
    trainer's ``resumed`` event (0 after a preemption, exit 75)."""
    launchers = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(JOB_ROLE_LABEL) == "launcher"]
    launchers.sort(key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    codes = []
    for pod in launchers[:-1]:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
            if code not in (None, 0):
                codes.append(str(code))
    if not codes:
        return None
    return (f"the launcher Job retried {len(codes)}x (exit code {', '.join(codes)}; {exitcodes.PREEMPTED}: preempted "
            "after a checkpoint) and went on from the run's last checkpoint; its resumed event says the steps lost")


def missing_status(namespace: str, name: str, *, reused_by: str | None = None) -> JobStatus:
    """LOST (final): the MPIJob is gone and its outcome was never seen, so waiters stop.
    ``reused_by``: the uid of another MPIJob that has taken the name since (never shown as ours)."""
    if reused_by:
        return JobStatus(
            JobState.LOST, finished=time.time(),
            reason=f"MPIJob {namespace}/{name} no longer exists: the name now belongs to another MPIJob (uid "
                   f"{reused_by}), which is not this job and is left alone; this job's final state was never seen, "
                   "its run directory may still hold checkpoints and metrics",
        )
    return JobStatus(
        JobState.LOST, finished=time.time(),
        reason=f"MPIJob {namespace}/{name} no longer exists (deleted by someone else, or removed by "
               "ttlSecondsAfterFinished) and its final state was never seen; its run directory may still hold "
               "checkpoints and metrics",
    )


def mpijob_status(job: dict[str, Any] | None, pods: list[dict[str, Any]] | None = None,
                  events: list[dict[str, Any]] | None = None) -> JobStatus:
    """Read one MPIJob (as returned by the API), its pods and the Warning events about them."""
    pods = pods or []
    if job is None:
        return JobStatus(JobState.LOST, reason="the MPIJob does not exist", finished=time.time())
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    conds = _conditions(job)
    ranks = {(p.get("metadata") or {}).get("name"): pod_state(p) for p in pods}
    started = parse_time(status.get("startTime")) or parse_time(conds.get("Running", {}).get("lastTransitionTime"))
    finished = parse_time(status.get("completionTime"))
    exit_code = _launcher_exit(pods)
    problems = [p for p in (pod_problem(pod) for pod in pods) if p]
    blocked = event_problem(events or [])

    def make(state: JobState, reason: str | None, cond: str | None = None) -> JobStatus:
        message = conds.get(cond, {}).get("message") if cond else None
        return JobStatus(state, reason=reason, message=message, started=started, finished=finished,
                         ranks=ranks, exit_code=exit_code)

    if _true(conds, "Succeeded"):  # before deletionTimestamp: a TTL clean-up does not undo a success
        return make(JobState.SUCCEEDED, _retries(pods), "Succeeded")
    if _true(conds, "Failed") and exit_code == exitcodes.PREEMPTED and not problems:
        return make(JobState.PREEMPTED, "a SIGTERM stopped every rank after a checkpoint and no launcher retry is left "
                    "(k8s.backoff_limit); a job with --resume in the same run_dir goes on from there", "Failed")
    if _true(conds, "Failed"):
        cond = conds["Failed"]
        reason = problems[0] if problems else (cond.get("message") or cond.get("reason") or "the launcher failed")
        if exit_code not in (None, 0) and not problems:
            reason = f"{reason} (launcher exit code {exit_code})"
        if cond.get("reason") == "DeadlineExceeded":
            reason = f"stopped after activeDeadlineSeconds: {cond.get('message') or ''}".strip()
        return make(JobState.FAILED, reason, "Failed")
    if meta.get("deletionTimestamp"):
        return make(JobState.CANCELLED, "the MPIJob is being deleted (its pods are stopping)")
    if _true(conds, "Suspended"):
        return make(JobState.SUSPENDED, "suspended (runPolicy.suspend=true); resume to continue", "Suspended")
    if _true(conds, "Restarting"):
        return make(JobState.RESTARTING, problems[0] if problems else conds["Restarting"].get("message"), "Restarting")
    if _true(conds, "Running"):
        return make(JobState.RUNNING, problems[0] if problems else _retries(pods), "Running")
    if not conds:
        return make(JobState.PENDING, blocked or "waiting for the MPI Operator to pick the job up (no status yet)")
    if problems:
        return make(JobState.PENDING, problems[0], "Created")
    if blocked:
        return make(JobState.PENDING, blocked, "Created")
    if not pods:
        return make(JobState.PENDING, "created; waiting for the operator to create the pods", "Created")
    waiting = [n for n, s in ranks.items() if s not in ("Running", "Succeeded")]
    return make(JobState.PENDING, f"waiting for pods to start: {', '.join(sorted(map(str, waiting)))}" if waiting
                else "waiting for the launcher", "Created")
