"""OpenShift mode (``k8s.openshift``): pods that pass Pod Security "restricted" (what OpenShift's
restricted SCC asks too), refused root pods on a namespace that enforces it, and the mode chosen
by itself when the API server serves ``security.openshift.io``."""

from __future__ import annotations

import argparse
import copy
import socket
import threading

import pytest
from fake_operator import FakeCluster, add_operator_parts, local_argv
from k8s_harness import add_pvc, start_emulator
from kube_emulator import MPIJOBS, NAMESPACES, SCCS
from pod_security import admission_error, restricted_violations
from polling import wait_for

from lanenb.backends.kubernetes.backend import KubernetesBackend, ManifestError, RetryPolicy, build_mpijob
from lanenb.backends.kubernetes.restricted import HOME, SSH_AUTH_MOUNT_PATH, SSH_PORT
from lanenb.commands.arguments import add_job_arguments, spec_from_args
from lanenb.contract.spec import SpecError, TrainSpec
from lanenb.contract.status import JobState
from lanenb_trainer.launcher import ssh_ready, wait_for_hosts

IMAGE = "registry.example.com/lanenb-trainer:0.1"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def make_spec(**kw) -> TrainSpec:
    base = dict(dataset="/data/tusimple", backend="kubernetes", image=IMAGE, processes=2, name="lane-os",
                volumes=["data:/data"])
    base.update(kw)
    return TrainSpec(**base)


def operator_pods(job: dict) -> dict[str, dict]:
    """The launcher and a worker pod as the operator creates them from ``job``."""
    pods = {}
    for role, replica in (("launcher", "Launcher"), ("worker", "Worker")):
        spec = copy.deepcopy(job["spec"]["mpiReplicaSpecs"][replica]["template"]["spec"])
        add_operator_parts(job, spec, role)
        pods[role] = {"metadata": {"name": f"lane-os-{role}"}, "spec": spec}
    return pods


def test_openshift_mode_pods_pass_the_restricted_level():
    job = build_mpijob(make_spec(k8s={"openshift": True}, large_shm=True), namespace="secure")
    for role, pod in operator_pods(job).items():
        assert restricted_violations(pod) == [], role
        assert "runAsUser" not in pod["spec"]["securityContext"]  # the SCC picks the UID
        assert all("runAsUser" not in (c.get("securityContext") or {}) for c in pod["spec"]["containers"])
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["HOME"] == HOME and not any(k.startswith("OMPI_ALLOW_RUN_AS_ROOT") for k in env)
        mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
        assert {HOME, SSH_AUTH_MOUNT_PATH} <= mounts
    assert job["spec"]["sshAuthMountPath"] == SSH_AUTH_MOUNT_PATH
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    # the init (lanenb_trainer.worker_init) wraps the entrypoint: sshd is its child, not PID 1
    assert worker["command"] == ["python", "-m", "lanenb_trainer.worker_init", "--grace", "50", "--",
                                 "/usr/local/bin/lanenb-entrypoint", "sshd", str(SSH_PORT)]
    args = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    assert "--allow-run-as-root" not in args
    assert args[:2] == ["--ssh-port", str(SSH_PORT)]
    assert args[args.index("plm_rsh_args") + 1].startswith(f"-p {SSH_PORT} ")


def test_root_mode_pods_break_the_restricted_level_with_the_apiservers_words():
    pods = operator_pods(build_mpijob(make_spec(k8s={"openshift": False}), namespace="secure"))
    message = admission_error(pods["worker"], {"metadata": {"labels": RESTRICTED}})
    assert message is not None and message.startswith(
        'pods "lane-os-worker" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "worker" must set '
        'securityContext.allowPrivilegeEscalation=false)')
    assert 'runAsNonRoot != true (pod or container "worker" must set securityContext.runAsNonRoot=true)' in message
    assert admission_error(pods["worker"], {"metadata": {"labels": {}}}) is None  # no level: admitted


@pytest.mark.parametrize("change,check", [
    (lambda s: s.update(hostNetwork=True), "host namespaces (hostNetwork=true)"),
    (lambda s: s["containers"][0]["securityContext"].update(privileged=True), "privileged (container"),
    (lambda s: s["containers"][0]["securityContext"].update(allowPrivilegeEscalation=True),
     "allowPrivilegeEscalation != false"),
    (lambda s: s["containers"][0]["securityContext"]["capabilities"].update(add=["IPC_LOCK"]),
     ('unrestricted capabilities (container "worker" must not include "IPC_LOCK" in '
      'securityContext.capabilities.add)')),
    (lambda s: s["volumes"].append({"name": "host", "hostPath": {"path": "/"}}),
     'restricted volume types (volume "host" uses restricted volume type "hostPath")'),
    (lambda s: s["containers"][0]["securityContext"].update(runAsNonRoot=False), "runAsNonRoot != true"),
    (lambda s: s["securityContext"].update(runAsUser=0), "runAsUser=0 (pod must not set runAsUser=0)"),
    (lambda s: s["containers"][0]["securityContext"].update(seccompProfile={"type": "Unconfined"}),
     'seccompProfile (container "worker" must set'),
    (lambda s: s["containers"][0].update(ports=[{"containerPort": 2222, "hostPort": 22}]),
     'hostPort (container "worker" uses hostPort 22)'),
], ids=["hostNetwork", "privileged", "escalation", "capability", "hostPath", "root", "uid0", "seccomp", "hostPort"])
def test_each_restricted_check_refuses_what_it_guards(change, check):
    pod = operator_pods(build_mpijob(make_spec(k8s={"openshift": True}), namespace="secure"))["worker"]
    change(pod["spec"])
    assert len(restricted_violations(pod)) == 1
    assert check in (admission_error(pod, {"metadata": {"labels": RESTRICTED}}) or "")


def test_rdma_pods_are_refused_in_openshift_mode_naming_the_capability():
    with pytest.raises(SpecError, match=r"k8s.openshift=True: RDMA pods need the IPC_LOCK capability"):
        make_spec(k8s={"openshift": True, "rdma_resources": {"rdma/shared_ib": 1}})
    spec = make_spec(k8s={"rdma_resources": {"rdma/shared_ib": 1}})  # auto: refused once the cluster says OpenShift
    with pytest.raises(ManifestError, match=r"k8s.rdma_resources=.*IPC_LOCK.*--no-openshift"):
        build_mpijob(spec, openshift=True)


def test_a_volume_over_the_openshift_home_is_refused():
    spec = make_spec(volumes=["data:/data", f"cache:{HOME}/cache"], k8s={"openshift": True})
    with pytest.raises(ManifestError, match=f"cannot mount at {HOME}/cache: OpenShift mode mounts the pods' "
                       "writable HOME"):
        build_mpijob(spec)


@pytest.mark.parametrize("flags,expected", [([], None), (["--openshift"], True), (["--no-openshift"], False)])
def test_the_openshift_flags_set_the_option_and_leaving_them_out_means_auto(flags, expected):
    parser = add_job_arguments(argparse.ArgumentParser())
    ns = parser.parse_args(["--data", "/data/tusimple", "--backend", "kubernetes", "--image", IMAGE, *flags])
    assert spec_from_args(ns, parser).k8s.openshift is expected


@pytest.mark.parametrize("value", ["maybe", 2])
def test_a_bad_openshift_value_is_refused_naming_it(value):
    with pytest.raises(SpecError, match=rf"k8s.openshift={value!r}: must be true or false"):
        make_spec(k8s={"openshift": value})


def test_the_launcher_waits_for_sshd_on_the_port_it_is_given():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def banner() -> None:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_8.9\r\n")

        threading.Thread(target=banner, daemon=True).start()
        assert wait_for_hosts(["127.0.0.1"], 5.0, say=lambda _m: None, port=port) == {}
    assert ssh_ready("127.0.0.1", port=port, timeout=0.5) == f"port {port}: Connection refused"


# ---------------------------------------------------------------------------- on the test cluster
@pytest.fixture(params=[False, True], ids=["kubernetes", "openshift"])
def os_cluster(request, tmp_path):
    """(thread, fake, backend, serves_openshift): namespaces served, ``secure`` enforcing
    restricted; with the param, the API server also serves security.openshift.io."""
    thread = start_emulator()
    thread.emulator.install(NAMESPACES)
    if request.param:
        thread.emulator.install(SCCS)
    fake = FakeCluster(thread.emulator, workdir=str(tmp_path)).attach()
    thread.start()
    for ns, labels in (("default", {}), ("secure", RESTRICTED)):
        thread.call(thread.emulator.create, NAMESPACES, None, {"metadata": {"name": ns, "labels": labels}})
        add_pvc(thread, namespace=ns)
    backend = KubernetesBackend(kubeconfig=thread.write_kubeconfig(tmp_path / "kubeconfig"),
                                retry=RetryPolicy(attempts=3, base_delay=0.02, max_delay=0.1))
    yield thread, fake, backend, request.param
    thread.call(fake.shutdown)
    thread.stop()


def ranks_print(argv: list[str]) -> list[str]:
    """The launcher's real argv (image entrypoint, mpirun wrapper, mpirun) with a tiny rank program."""
    out = local_argv(argv)
    i = out.index("lanenb_trainer")  # the ranks' module (the wrapper is lanenb_trainer.launcher)
    return [*out[:i - 1], "-c", "import os; print('rank up', os.environ.get('PYTHONUNBUFFERED'))"]


def test_root_mode_is_refused_on_a_restricted_namespace_and_openshift_mode_runs(os_cluster):
    _thread, fake, backend, _ = os_cluster
    fake.rewrite_argv = ranks_print
    root = make_spec(name="lane-root", namespace="secure", k8s={"openshift": False})
    handle = backend.submit(root)
    status = wait_for(lambda: "PodSecurity" in ((s := backend.status(root, handle)).reason or "") and s,
                      what="the refused worker pod's event")
    assert status.state == JobState.PENDING, status
    assert status.reason.startswith("the MPI Operator could not create a pod (MPIJobFailed on MPIJob lane-root): "
                                    "worker pod created failed: "
                                    'pods "lane-root-worker-0" is forbidden: violates PodSecurity "restricted:latest"')
    assert status.reason.endswith("submit with k8s.openshift=True (--openshift) for non-root pods that pass the "
                                  "restricted level")
    assert fake.launched == []

    ok = make_spec(name="lane-ok", namespace="secure", k8s={"openshift": True})
    handle = backend.submit(ok)
    status = wait_for(lambda: (s := backend.status(ok, handle)).state.finished and s, what="the job to finish")
    assert status.state == JobState.SUCCEEDED, status
    launched = fake.launched[-1]
    assert launched[0].endswith("trainer/entrypoint.sh") and "--allow-run-as-root" not in launched
    assert [line.text for line in backend.logs(ok, handle)].count("rank up 1") == 2


def test_openshift_mode_follows_the_api_servers_groups_when_not_set(os_cluster):
    thread, _fake, backend, serves_openshift = os_cluster
    auto = make_spec(name="lane-auto")
    assert auto.k8s.openshift is None
    backend.submit(auto)
    job = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-auto")
    pod = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    if serves_openshift:
        assert job["spec"]["sshAuthMountPath"] == SSH_AUTH_MOUNT_PATH
        assert pod["securityContext"]["runAsNonRoot"] is True
    else:
        assert job["spec"]["sshAuthMountPath"] == "/root/.ssh" and "securityContext" not in pod
    backend.submit(make_spec(name="lane-auto-2"))
    assert [p for _m, p in thread.emulator.served if p.rstrip("/") == "/apis"] == ["/apis"]  # asked once
    backend.submit(make_spec(name="lane-set", k8s={"openshift": not serves_openshift}))  # set: never overridden
    job = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-set")
    assert (job["spec"]["sshAuthMountPath"] == SSH_AUTH_MOUNT_PATH) is (not serves_openshift)

