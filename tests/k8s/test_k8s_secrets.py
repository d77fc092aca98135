"""Issue 31, finding 3: a literal secret in ``env`` never sits in clear in the MPIJob (and so in
its pods, readable by everyone who may ``get pods``/``get mpijobs``): the backend puts it in a
Secret owned by the MPIJob and the pods read it through ``secretKeyRef``; the fake kubelet
resolves that as the real one does, so the rank still gets the value."""

from __future__ import annotations

import base64
import json
import sys
import time

import pytest
from homes import isolated_home
from k8s_harness import add_pvc
from kube_emulator import MPIJOBS, SECRETS, Fault

from lanenb.backends.kubernetes.backend import KubernetesAPIError, RetryPolicy
from lanenb.contract.redact import REDACTED
from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState
from lanenb.jobs import get_job, submit

IMAGE = "registry.example.com/lanenb-trainer:0.1"
TOKEN = "hf_" + "k8sSecretValue0123456789abcdef"
PROXY_PASSWORD = "s3cret-proxy-pw"
PROXY = f"http://me:{PROXY_PASSWORD}@proxy.corp:3128"
ECHO = ("import os; print('[1,0]<stdout>:token ' + str(os.environ.get('HF_TOKEN')), flush=True); "
        "print('[1,0]<stdout>:proxy ' + str(os.environ.get('HTTPS_PROXY')), flush=True)")


def make_spec(name: str) -> TrainSpec:
    return TrainSpec(dataset="/data/tusimple", backend="kubernetes", image=IMAGE, processes=2, name=name,
                     volumes=["data:/data"], env={"HF_TOKEN": TOKEN, "HTTPS_PROXY": PROXY, "LANE_NOTE": "kept"})


def wait_for(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_literal_secrets_go_to_a_secret_owned_by_the_mpijob_and_reach_the_rank(cluster, kubeconfig, tmp_path,
                                                                               monkeypatch):
    isolated_home(tmp_path, monkeypatch)
    thread, fake = cluster
    add_pvc(thread)
    fake.rewrite_argv = lambda argv: [sys.executable, "-c", ECHO]
    job = submit(make_spec("lane-sec"), kubeconfig=str(kubeconfig),
                 retry=RetryPolicy(attempts=4, base_delay=0.02, max_delay=0.1))

    mpijob = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-sec")
    assert TOKEN not in json.dumps(mpijob) and PROXY_PASSWORD not in json.dumps(mpijob)
    for replica in mpijob["spec"]["mpiReplicaSpecs"].values():
        env = {e["name"]: e for e in replica["template"]["spec"]["containers"][0]["env"]}
        assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": "lane-sec-lanenb-env", "key": "HF_TOKEN"}}}
        assert env["HTTPS_PROXY"]["valueFrom"]["secretKeyRef"]["key"] == "HTTPS_PROXY"
        assert env["LANE_NOTE"] == {"name": "LANE_NOTE", "value": "kept"}  # not a secret: stays readable
    secret = thread.call(thread.emulator.get, SECRETS, "default", "lane-sec-lanenb-env")
    assert secret["metadata"]["ownerReferences"][0]["uid"] == mpijob["metadata"]["uid"] == job.handle["uid"]
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "HF_TOKEN": TOKEN, "HTTPS_PROXY": PROXY}

    assert job.wait(timeout=30).state is JobState.SUCCEEDED
    texts = [line.text for line in get_job("lane-sec").logs()]  # another kernel's view
    assert texts == [f"token {REDACTED}", f"proxy http://me:{REDACTED}@proxy.corp:3128"]  # the rank got both

    job.backend.cancel(job.spec, job.handle)  # deleting the job deletes its Secret (garbage collector)
    wait_for(lambda: thread.call(thread.emulator.get, SECRETS, "default", "lane-sec-lanenb-env") is None)


def test_a_secret_the_cluster_refuses_deletes_the_mpijob_and_names_the_fix(cluster, backend):
    thread, fake = cluster
    add_pvc(thread)
    fake.rewrite_argv = lambda argv: [sys.executable, "-c", ECHO]
    thread.emulator.add_fault(Fault(lambda r: r.method.value == "POST" and "/secrets" in str(r.url), status=403))
    with pytest.raises(KubernetesAPIError) as err:
        backend.submit(make_spec("lane-forbidden"))
    text = str(err.value)
    assert "HF_TOKEN, HTTPS_PROXY" in text and "secret:SECRET/KEY" in text and "403" in text
    assert TOKEN not in text and PROXY_PASSWORD not in text
    wait_for(lambda: thread.call(thread.emulator.get, MPIJOBS, "default", "lane-forbidden") is None)


def test_rendered_and_described_manifests_hide_credentials_inside_values():
    """Finding 10: ``--dry-run`` YAML and ``describe`` never show a presigned URL's signature or a
    URL's password, whatever the variable or flag is called (the pods still get the real value)."""
    from lanenb.backends.kubernetes.manifests import build_mpijob, redact_mpijob, render

    signature = "9f8e7d6c5b4a39281706"
    spec = TrainSpec(dataset="/data/tusimple", backend="kubernetes", image=IMAGE, processes=2, name="lane-shape",
                     volumes=["data:/data"], env={"DATABASE_URL": "postgres://u:db-pa55@db/x"},
                     extra_args=["--init-from", f"https://b.s3.amazonaws.com/w.pt?X-Amz-Signature={signature}"])
    shown = render(spec)
    assert signature not in shown and "db-pa55" not in shown and f"X-Amz-Signature={REDACTED}" in shown
    sent = build_mpijob(spec)
    assert signature in json.dumps(sent)  # what the cluster runs keeps the real URL
    assert signature not in json.dumps(redact_mpijob(sent))
