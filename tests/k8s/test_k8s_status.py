"""Conditions + pod states -> JobStatus, for the states the fake kubelet does not produce."""

from __future__ import annotations

import time

from lanenb.backends.kubernetes.status import missing_status, mpijob_status
from lanenb.contract.status import JobState
from lanenb.kube.pods import parse_time, pod_problem


def job(*conds: tuple[str, str], **status) -> dict:
    return {"metadata": {"name": "j", "namespace": "default"},
            "status": {"conditions": [{"type": t, "status": s, "reason": f"MPIJob{t}", "message": f"{t} msg"}
                                      for t, s in conds], **status}}


def pod(role: str = "worker", **status) -> dict:
    return {"metadata": {"name": f"j-{role}-0", "labels": {"training.kubeflow.org/job-role": role,
                                                          "training.kubeflow.org/replica-index": "0"}},
            "spec": {"containers": [{"name": role, "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": 4}}}]},
            "status": status}


def test_crashloop_with_oom_last_state():
    p = pod(phase="Running", containerStatuses=[{
        "name": "worker", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}])
    st = mpijob_status(job(("Created", "True"), ("Restarting", "True")), [p])
    assert st.state == JobState.RESTARTING
    assert "worker-0 pod j-worker-0 keeps crashing (CrashLoopBackOff): it ran out of memory (OOMKilled)" in st.reason


def test_crashloop_with_exit_code():
    p = pod(containerStatuses=[{"name": "worker", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                "lastState": {"terminated": {"reason": "Error", "exitCode": 2}}}])
    assert "exited with code 2" in pod_problem(p)


def test_err_image_pull_names_the_image():
    p = pod(containerStatuses=[{"name": "worker",
                                "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}}}])
    st = mpijob_status(job(("Created", "True")), [p])
    assert st.state == JobState.PENDING
    assert st.reason.startswith("cannot pull image 'img:1' (ErrImagePull)") and st.reason.endswith("not found")


def test_unschedulable_gpu_message_counts_gpus():
    p = pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}])
    assert pod_problem(p) == ("waiting for 4 GPU(s) per worker: 0/2 nodes are available: 2 Insufficient "
                              "nvidia.com/gpu. (Unschedulable)")


def test_deadline_exceeded_and_suspended_and_deleting():
    failed = job(("Created", "True"), ("Failed", "True"))
    failed["status"]["conditions"][1]["reason"] = "DeadlineExceeded"
    assert mpijob_status(failed).reason.startswith("stopped after activeDeadlineSeconds")
    assert mpijob_status(job(("Created", "True"), ("Suspended", "True"))).state == JobState.SUSPENDED
    deleting = job(("Running", "True"))
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert mpijob_status(deleting).state == JobState.CANCELLED


def test_no_conditions_yet_means_operator_has_not_seen_it():
    st = mpijob_status({"metadata": {"name": "j"}})
    assert st.state == JobState.PENDING and "MPI Operator" in st.reason


def test_times_and_exit_code():
    launcher = pod("launcher", phase="Succeeded", containerStatuses=[
        {"name": "launcher", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}])
    st = mpijob_status(job(("Created", "True"), ("Succeeded", "True"), startTime="2024-01-01T00:00:00Z",
                           completionTime="2024-01-01T01:00:00Z"), [launcher])
    assert st.state == JobState.SUCCEEDED and st.exit_code == 0
    assert st.finished - st.started == 3600 and parse_time("2024-01-01T00:00:00Z") == 1704067200


def test_gone_mpijob_is_lost_and_final_now():
    """A vanished MPIJob (or none at all) is LOST with the time it was noticed, so waiters stop."""
    before = time.time()
    for st in (missing_status("default", "j"), mpijob_status(None)):
        assert st.state == JobState.LOST and st.state.finished
        assert before <= st.finished <= time.time()
    assert "MPIJob default/j no longer exists" in missing_status("default", "j").reason
