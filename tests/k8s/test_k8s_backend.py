"""The Kubernetes backend end to end over real HTTP: the real ``kubernetes`` client against
the kmock-based emulator, with a fake operator/kubelet that really runs the launcher command."""

from __future__ import annotations

import sys
import time

import pytest
from k8s_harness import add_pvc, warm_up
from kube_emulator import MPIJOBS, PODS, Fault

from lanenb.backends.kubernetes.backend import (
    KubernetesAPIError,
    KubernetesBackend,
    KubernetesConfigError,
    KubernetesUnreachableError,
    OperatorNotInstalledError,
    RetryPolicy,
)
from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState

IMAGE = "registry.example.com/lanenb-trainer:0.1"


def tiny(lines: int = 5, rc: int = 0, sleep: float = 0.0, kill: bool = False):
    """Replace the launcher argv by a small Python program printing rank-tagged lines."""
    code = (
        "import os, signal, sys, time\n"
        f"for i in range({lines}):\n"
        "    print(f'[1,{i % 2}]<stdout>:line {i}', flush=True)\n"
        f"    time.sleep({sleep})\n"
        + ("os.kill(os.getpid(), signal.SIGKILL)\n" if kill else "")
        + f"sys.exit({rc})\n"
    )
    return lambda argv: [sys.executable, "-c", code]


@pytest.fixture(autouse=True)
def data_pvc(request):
    """The PVC every job mounts (data and run dir), when the test has a cluster."""
    if "cluster" in request.fixturenames:
        add_pvc(request.getfixturevalue("cluster")[0])


def make_spec(**kw) -> TrainSpec:
    base = dict(dataset="/data/tusimple", backend="kubernetes", image=IMAGE, processes=2, name="lane-test",
                volumes=["data:/data"])
    base.update(kw)
    return TrainSpec(**base)


def wait_state(backend, spec, handle, states, timeout=20.0):
    deadline = time.monotonic() + timeout
    status = backend.status(spec, handle)
    while status.state not in states and time.monotonic() < deadline:
        time.sleep(0.05)
        status = backend.status(spec, handle)
    return status


def test_submit_runs_to_success_and_logs_carry_ranks(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=6)
    spec = make_spec()
    handle = backend.submit(spec, run_dir=None)
    assert handle["namespace"] == "default" and handle["name"] == "lane-test" and handle["uid"]
    status = wait_state(backend, spec, handle, {JobState.SUCCEEDED, JobState.FAILED})
    assert status.state == JobState.SUCCEEDED, status
    assert status.exit_code == 0
    lines = list(backend.logs(spec, handle))
    assert [l.text for l in lines] == [f"line {i}" for i in range(6)]
    assert [l.rank for l in lines] == [0, 1, 0, 1, 0, 1]
    assert all(l.source == "launcher" for l in lines)
    # the operator's pods: launcher found by labels despite its random suffix
    stored = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-test")
    assert stored["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "lanenb"


def test_follow_survives_dropped_connections_without_loss_or_duplicates(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=40, sleep=0.01)
    spec = make_spec(name="lane-follow")
    # Cut the first two follow streams after 7 and 5 lines.
    is_follow = lambda r: r.subresource == "log" and r.params.get("follow") == "true"  # noqa: E731
    thread.emulator.add_fault(Fault(is_follow, drop_after_lines=7))
    thread.emulator.add_fault(Fault(is_follow, drop_after_lines=5))
    handle = backend.submit(spec)
    texts = [l.text for l in backend.logs(spec, handle, follow=True)]
    assert texts == [f"line {i}" for i in range(40)]
    follows = [p for m, p in thread.emulator.served if "/log" in p and "follow=true" in p]
    assert len(follows) >= 3, follows  # it really reconnected
    assert any("sinceSeconds=" in p for p in follows)


def test_worker_logs_are_that_ranks_lines_as_locally(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=4)
    spec = make_spec(name="lane-workers", k8s={"clean_pod_policy": "None"})
    handle = backend.submit(spec)
    wait_state(backend, spec, handle, {JobState.SUCCEEDED})
    thread.call(lambda: thread.emulator.pod_log("default", "lane-workers-worker-1", "worker").append("sshd ready"))
    lines = list(backend.logs(spec, handle, worker=1))
    assert [(l.rank, l.text) for l in lines] == [(1, "line 1"), (1, "line 3")]  # rank 1, not sshd of pod 1


def test_failed_launcher_reports_exit_code(cluster, backend):
    _, fake = cluster
    fake.rewrite_argv = tiny(lines=1, rc=3)
    spec = make_spec(name="lane-fail")
    handle = backend.submit(spec)
    status = wait_state(backend, spec, handle, {JobState.FAILED, JobState.SUCCEEDED})
    assert status.state == JobState.FAILED
    assert status.exit_code == 3 and "exit code 3" in status.reason


def test_oomkilled_is_explained(cluster, backend):
    _, fake = cluster
    fake.rewrite_argv = tiny(lines=1, kill=True)
    spec = make_spec(name="lane-oom")
    handle = backend.submit(spec)
    status = wait_state(backend, spec, handle, {JobState.FAILED, JobState.SUCCEEDED})
    assert status.state == JobState.FAILED
    assert "OOMKilled" in status.reason and "memory=" in status.reason


def test_image_pull_error_is_explained(cluster, backend):
    _, fake = cluster
    fake.unpullable_images.add("registry.example.com/typo:1")
    spec = make_spec(name="lane-pull", image="registry.example.com/typo:1")
    handle = backend.submit(spec)
    status = wait_state(backend, spec, handle, {JobState.FAILED}, timeout=1.0)
    assert status.state == JobState.PENDING
    assert "cannot pull image 'registry.example.com/typo:1'" in status.reason
    assert "ImagePullBackOff" in status.reason


def test_unschedulable_gpus_are_explained(cluster, backend):
    spec = make_spec(name="lane-gpus", gpus=2)  # 3 fake nodes with 1 GPU each
    handle = backend.submit(spec)
    status = wait_state(backend, spec, handle, {JobState.RUNNING}, timeout=1.0)
    assert status.state == JobState.PENDING
    assert status.reason.startswith("waiting for 2 GPU(s) per worker")
    assert "Insufficient nvidia.com/gpu" in status.reason and "(Unschedulable)" in status.reason


def test_missing_pvc_is_explained(cluster, backend):
    spec = make_spec(name="lane-pvc", volumes=["tusimple-data:/mnt"], dataset="/mnt/tusimple")
    handle = backend.submit(spec)
    status = wait_state(backend, spec, handle, {JobState.RUNNING}, timeout=1.0)
    assert status.state == JobState.PENDING
    assert "volume claim 'tusimple-data' does not exist" in status.reason


def test_missing_crd_says_how_to_install(tmp_path):
    from k8s_harness import start_emulator

    thread = start_emulator(operator_installed=False).start()
    try:
        backend = KubernetesBackend(kubeconfig=thread.write_kubeconfig(tmp_path / "kc"))
        spec = make_spec(name="lane-nocrd")
        with pytest.raises(OperatorNotInstalledError) as err:
            backend.submit(spec)
        msg = str(err.value)
        assert "MPI Operator is not installed" in msg and "deploy/" in msg and thread.url in msg
        with pytest.raises(OperatorNotInstalledError):
            backend.status(spec, {"namespace": "default", "name": "lane-nocrd"})
    finally:
        thread.stop()


def test_api_unreachable_is_a_clear_error(kubeconfig):
    backend = KubernetesBackend(kubeconfig=kubeconfig, context="unreachable",
                                retry=RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02))
    with pytest.raises(KubernetesUnreachableError) as err:
        backend.submit(make_spec(name="lane-down"))
    assert "cannot reach the Kubernetes API server at http://127.0.0.1:9" in str(err.value)
    assert "'unreachable'" in str(err.value)


def test_unknown_context_lists_the_known_ones(kubeconfig):
    backend = KubernetesBackend(kubeconfig=kubeconfig, context="prod-eu")
    with pytest.raises(KubernetesConfigError) as err:
        backend.status(make_spec(), {"name": "lane-test", "namespace": "default"})
    assert "context 'prod-eu' is not in kubeconfig" in str(err.value)
    assert "emulator" in str(err.value) and "unreachable" in str(err.value)


def test_missing_kubeconfig_is_explained(tmp_path):
    backend = KubernetesBackend(kubeconfig=tmp_path / "nope", in_cluster=False)
    with pytest.raises(KubernetesConfigError, match=r"no kubeconfig at .*nope"):
        backend.submit(make_spec())


def test_server_errors_are_retried(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=1)
    posts = lambda r: r.method.value == "POST"  # noqa: E731
    thread.emulator.add_fault(Fault(posts, status=503, times=2))
    thread.emulator.add_fault(Fault(lambda r: r.method.value == "GET", status=429, times=1))
    spec = make_spec(name="lane-retry")
    handle = backend.submit(spec)
    assert wait_state(backend, spec, handle, {JobState.SUCCEEDED}).state == JobState.SUCCEEDED
    assert sum(1 for m, p in thread.emulator.served if m == "POST" and "/mpijobs" in p) == 3  # 2 refused, 1 made


def test_persistent_server_errors_surface(cluster, backend):
    thread, _ = cluster
    thread.emulator.add_fault(Fault(lambda r: r.method.value == "POST", status=500, times=10))
    with pytest.raises(KubernetesAPIError, match="creating MPIJob default/lane-500 failed: 500"):
        backend.submit(make_spec(name="lane-500"))


def test_duplicate_name_is_refused(cluster, backend):
    _, fake = cluster
    fake.rewrite_argv = tiny(lines=1)
    backend.submit(make_spec(name="lane-dup"))
    with pytest.raises(KubernetesAPIError, match="an MPIJob named 'lane-dup' already exists in namespace 'default'"):
        backend.submit(make_spec(name="lane-dup"))


def test_bad_names_are_refused_before_any_request(cluster, backend):
    thread, _ = cluster
    with pytest.raises(ValueError, match="'Bad_Name'"):
        backend.status(make_spec(), {"name": "Bad_Name", "namespace": "default"})
    with pytest.raises(ValueError, match="namespace '-x' must be an RFC 1123 label"):
        backend.status(make_spec(), {"name": "ok", "namespace": "-x"})
    assert thread.emulator.served == []


def test_cancel_deletes_with_foreground_propagation_and_stops_the_launcher(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=1000, sleep=0.05)
    spec = make_spec(name="lane-cancel")
    handle = backend.submit(spec)
    assert wait_state(backend, spec, handle, {JobState.RUNNING}).state == JobState.RUNNING
    backend.cancel(spec, handle)
    deletes = [p for m, p in thread.emulator.served if m == "DELETE"]
    assert deletes == ["/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs/lane-cancel?propagationPolicy=Foreground"]
    status = wait_state(backend, spec, handle, {JobState.LOST})  # CANCELLED while its pods stop
    assert status.state == JobState.LOST
    assert thread.call(thread.emulator.get, MPIJOBS, "default", "lane-cancel") is None
    assert thread.call(thread.emulator.list, PODS, "default") == []  # dependents garbage-collected
    assert ("default", "lane-cancel") not in fake.processes
    backend.cancel(spec, handle)  # twice is fine


def test_suspend_sets_run_policy_and_reports_suspended(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=1000, sleep=0.05)
    spec = make_spec(name="lane-suspend")
    handle = backend.submit(spec)
    wait_state(backend, spec, handle, {JobState.RUNNING})
    backend.suspend(spec, handle)
    stored = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-suspend")
    assert stored["spec"]["runPolicy"]["suspend"] is True
    status = wait_state(backend, spec, handle, {JobState.SUSPENDED})
    assert status.state == JobState.SUSPENDED and "suspend" in status.reason


def test_watch_survives_500_410_and_drops_and_reports_each_change_once(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=10, sleep=0.3)
    spec = make_spec(name="lane-watch")
    warm_up(backend)
    emu = thread.emulator
    watches = lambda r: r.params.get("watch") == "true"  # noqa: E731
    emu.add_fault(Fault(watches, status=500, times=1))  # the first watch fails outright
    emu.add_fault(Fault(watches, status=410, times=1))  # the next one: resourceVersion expired
    emu.add_fault(Fault(watches, drop_after_lines=0, times=1))  # then a connection drops
    handle = backend.submit(spec)
    statuses = list(backend.watch(spec, handle, timeout=30))
    states = [s.state for s in statuses]
    assert states[-1] == JobState.SUCCEEDED, states
    # no state repeats out of order: pending* running* succeeded
    order = {JobState.PENDING: 0, JobState.RUNNING: 1, JobState.SUCCEEDED: 2}
    assert [order[s] for s in states] == sorted(order[s] for s in states), states
    served = [p for m, p in emu.served if "/mpijobs?" in p]
    watch_calls = [p for p in served if "watch=true" in p]
    lists = [p for p in served if "watch=true" not in p]
    assert len(watch_calls) >= 4, watch_calls  # 500, 410, dropped, then a good one
    assert len(lists) >= 2, "no re-list after 410 Gone"
    assert all("resourceVersion=" in p for p in watch_calls)


def test_describe_lists_pods_and_conditions(cluster, backend):
    _, fake = cluster
    fake.rewrite_argv = tiny(lines=1)
    spec = make_spec(name="lane-describe", k8s={"clean_pod_policy": "None"})
    handle = backend.submit(spec)
    wait_state(backend, spec, handle, {JobState.SUCCEEDED})
    info = backend.describe(spec, handle)
    roles = sorted(p["role"] for p in info["pods"])
    assert roles == ["launcher", "worker", "worker"]
    assert {c["type"] for c in info["conditions"]} >= {"Created", "Succeeded"}
    assert info["status"]["state"] == "succeeded"


def test_watch_drops_replayed_events(cluster, backend):
    """Stock kmock (and some proxies) replay every object as ADDED on each (re)watch."""
    from lanenb.kube.watch import watch_mpijob

    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=6, sleep=0.2)
    thread.emulator.replay_all_on_watch = True
    watches = lambda r: r.params.get("watch") == "true"  # noqa: E731
    for _ in range(3):
        thread.emulator.add_fault(Fault(watches, drop_after_lines=1))  # reconnect often
    warm_up(backend)
    spec = make_spec(name="lane-replay")
    backend.submit(spec)
    seen = []
    for _kind, obj in watch_mpijob(backend.clients(), "default", "lane-replay", timeout=20):
        seen.append(int(obj["metadata"]["resourceVersion"]))
        if any(c["type"] == "Succeeded" for c in obj.get("status", {}).get("conditions", [])):
            break
    assert seen == sorted(set(seen)), seen  # each version once, in order
    assert sum(1 for m, p in thread.emulator.served if "watch=true" in p) >= 2


def test_in_cluster_without_service_account_is_explained(monkeypatch):
    from lanenb.kube.client import load_clients

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubernetesConfigError, match="in-cluster Kubernetes config is not usable"):
        load_clients(in_cluster=True)


def test_create_retried_after_a_lost_answer_is_not_a_duplicate(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=1)
    thread.emulator.add_fault(Fault(lambda r: r.method.value == "POST", drop_after_lines=0))
    spec = make_spec(name="lane-lost")
    handle = backend.submit(spec)  # 1st POST created it but the answer was lost; the retry gets 409
    assert sum(1 for m, p in thread.emulator.served if m == "POST" and "/mpijobs" in p) == 2
    stored = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-lost")
    assert handle["uid"] == stored["metadata"]["uid"]


def test_follow_gives_up_with_a_clear_error_when_the_stream_keeps_dropping(cluster, backend):
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=100, sleep=0.05)
    is_follow = lambda r: r.subresource == "log" and r.params.get("follow") == "true"  # noqa: E731
    thread.emulator.add_fault(Fault(is_follow, drop_after_lines=0, times=100))
    spec = make_spec(name="lane-flaky")
    handle = backend.submit(spec)
    with pytest.raises(KubernetesUnreachableError, match="lost the log stream of pod default/lane-flaky-launcher-"):
        list(backend.logs(spec, handle, follow=True))


def test_forbidden_points_at_the_rbac_manifest(cluster, backend):
    thread, _ = cluster
    thread.emulator.add_fault(Fault(lambda r: r.method.value == "POST", status=403))
    with pytest.raises(KubernetesAPIError, match=r"not allowed: creating MPIJob lane-rbac in namespace default .*"
                                                 r"403 Forbidden.*deploy/rbac-submitter.yaml"):
        backend.submit(make_spec(name="lane-rbac"))


def test_a_name_reused_by_a_teammate_reads_as_gone_and_is_never_stopped_as_ours(cluster, backend):
    """Issue 31, finding 6: ours is deleted (a TTL, a teammate's kubectl), then a teammate submits
    an MPIJob of the same name. Our handle's uid no longer matches: our view says LOST, shows
    none of their logs, and cancel/suspend from our handle leave theirs running."""
    thread, fake = cluster
    fake.rewrite_argv = tiny(lines=1000, sleep=0.05)
    spec = make_spec(name="lane-reuse")
    ours = backend.submit(spec)
    assert wait_state(backend, spec, ours, {JobState.RUNNING}).state == JobState.RUNNING
    thread.call(thread.emulator.delete, MPIJOBS, "default", "lane-reuse", "Background")
    assert wait_state(backend, spec, ours, {JobState.LOST}).state == JobState.LOST
    theirs = backend.submit(make_spec(name="lane-reuse"))  # same namespace and name, a new uid
    assert theirs["uid"] != ours["uid"]
    assert wait_state(backend, spec, theirs, {JobState.RUNNING}).state == JobState.RUNNING

    status = backend.status(spec, ours)
    assert status.state == JobState.LOST and f"now belongs to another MPIJob (uid {theirs['uid']})" in status.reason
    assert backend.describe(spec, ours)["status"]["state"] == "lost"
    assert [s.state for s in backend.watch(spec, ours, timeout=5)] == [JobState.LOST]
    assert list(backend.logs(spec, ours)) == [] and backend.read_log(spec, ours, None).lines == []
    with pytest.raises(KubernetesAPIError, match="now belongs to another MPIJob"):
        backend.suspend(spec, ours)
    backend.cancel(spec, ours)  # ours is gone: nothing to do, and theirs must not be deleted
    stored = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-reuse")
    assert stored is not None and stored["metadata"]["uid"] == theirs["uid"]
    assert not (stored["spec"].get("runPolicy") or {}).get("suspend")
    assert backend.status(spec, theirs).state == JobState.RUNNING
    backend.cancel(spec, theirs)  # their own handle still stops theirs
    assert wait_state(backend, spec, theirs, {JobState.LOST}).state == JobState.LOST
