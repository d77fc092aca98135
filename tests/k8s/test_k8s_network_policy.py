"""Issue 43: the ranks' rendezvous (torch.distributed's store, Horovod's controller), sshd and
the collectives listen on ports of their own and take whoever connects. Each job gets a
NetworkPolicy, owned by its MPIJob, that lets only the job's own pods reach its pods; a
cluster that refuses it gets the MPIJob deleted again and the fix named, and
``--no-network-policy`` leaves it out where the cluster's own policies isolate jobs."""

from __future__ import annotations

import argparse
import sys
import time

import pytest
from k8s_harness import add_pvc
from kube_emulator import MPIJOBS, NETWORK_POLICIES, PODS, Fault

from lanenb.backends.kubernetes.backend import KubernetesAPIError
from lanenb.commands.arguments import add_job_arguments, spec_from_args
from lanenb.contract.spec import TrainSpec
from lanenb.errors import SpecError

IMAGE = "registry.example.com/lanenb-trainer:0.1"
SLEEP = [sys.executable, "-c", "import time; time.sleep(30)"]


def make_spec(name: str, **k8s) -> TrainSpec:
    return TrainSpec(dataset="/data/tusimple", backend="kubernetes", image=IMAGE, processes=2, name=name,
                     volumes=["data:/data"], k8s=k8s)


def wait_for(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return found


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def test_only_the_jobs_own_pods_reach_its_pods(cluster, backend):
    thread, fake = cluster
    add_pvc(thread)
    fake.rewrite_argv = lambda argv: SLEEP
    handle = backend.submit(make_spec("lane-fenced"))
    other = backend.submit(make_spec("lane-other"))
    policy = thread.call(thread.emulator.get, NETWORK_POLICIES, "default", "lane-fenced-lanenb-peers")
    mpijob = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-fenced")
    assert policy["metadata"]["ownerReferences"][0]["uid"] == mpijob["metadata"]["uid"] == handle["uid"]
    assert policy["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "lanenb"
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec  # fetches and pulls go out as before
    (rule,) = spec["ingress"]
    assert "ports" not in rule  # every port: sshd, the rendezvous and the collectives pick their own
    (peers,) = rule["from"]

    def pods_of(job: str) -> list[dict]:
        return [p for p in thread.call(thread.emulator.list, PODS, "default")
                if p["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") == job]

    mine = wait_for(lambda: len(pods_of("lane-fenced")) >= 3 and pods_of("lane-fenced"))  # launcher + 2 workers
    theirs = wait_for(lambda: pods_of("lane-other"))
    for pod in mine:  # the operator's labels on every pod of the job: each is fenced, and each may reach the others
        labels = pod["metadata"]["labels"]
        assert _selects(spec["podSelector"], labels) and _selects(peers["podSelector"], labels)
    for pod in theirs:  # another job's pods are neither fenced by it nor let in
        labels = pod["metadata"]["labels"]
        assert not _selects(spec["podSelector"], labels) and not _selects(peers["podSelector"], labels)
    assert "namespaceSelector" not in peers  # a pod of the same name in another namespace is not a peer

    backend.cancel(make_spec("lane-fenced"), handle)  # deleting the job deletes its policy (garbage collector)
    wait_for(lambda: thread.call(thread.emulator.get, NETWORK_POLICIES, "default", "lane-fenced-lanenb-peers") is None)
    backend.cancel(make_spec("lane-other"), other)


def test_no_network_policy_leaves_it_to_the_cluster(cluster, backend):
    thread, fake = cluster
    add_pvc(thread)
    fake.rewrite_argv = lambda argv: SLEEP
    spec = make_spec("lane-open", network_policy=False)
    handle = backend.submit(spec)
    assert thread.call(thread.emulator.get, MPIJOBS, "default", "lane-open") is not None
    assert thread.call(thread.emulator.list, NETWORK_POLICIES, "default") == []
    backend.cancel(spec, handle)


def test_a_policy_the_cluster_refuses_deletes_the_mpijob_and_names_the_fix(cluster, backend):
    thread, fake = cluster
    add_pvc(thread)
    fake.rewrite_argv = lambda argv: SLEEP
    thread.emulator.add_fault(Fault(lambda r: r.method.value == "POST" and "/networkpolicies" in str(r.url),
                                    status=403))
    with pytest.raises(KubernetesAPIError) as err:
        backend.submit(make_spec("lane-refused"))
    text = str(err.value)
    assert "403" in text and "deploy/rbac-submitter.yaml" in text and "--no-network-policy" in text
    assert "MPIJob default/lane-refused was deleted again" in text
    wait_for(lambda: thread.call(thread.emulator.get, MPIJOBS, "default", "lane-refused") is None)


@pytest.mark.parametrize("flags,expected", [([], True), (["--no-network-policy"], False)])
def test_the_flag_and_the_option_spell_the_same_setting(flags, expected):
    parser = add_job_arguments(argparse.ArgumentParser())
    ns = parser.parse_args(["--data", "/data/tusimple", "--backend", "kubernetes", "--image", IMAGE, *flags])
    assert spec_from_args(ns, parser).k8s.network_policy is expected


def test_a_bad_value_is_refused_naming_it():
    with pytest.raises(SpecError, match=r"k8s.network_policy='sometimes': must be true or false"):
        make_spec("lane-bad", network_policy="sometimes")
