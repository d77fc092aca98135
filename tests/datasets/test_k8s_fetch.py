"""The cluster fetch: a PVC + ``batch/v1`` Job through the real kubernetes client to the emulator,
whose fake Job controller really runs the Job's command against the loopback HTTP server. The
Job is a lanenb job: the Job API (``get_job``, ``%lanejobs``' table, ``lanenb jobs``) runs it."""

from __future__ import annotations

import json
import threading

import pytest
from fetch_support import LoopbackServer
from k8s_fetch_support import FakeJobController
from kube_emulator import JOBS, PVCS, SECRETS
from polling import wait_for

import lanenb
from lanenb.backends.fetch.objects import (
    FETCH_ENTRYPOINT,
    FetchJobError,
    build_fetch_job,
    build_fetch_pvc,
    dataset_pvcs,
)
from lanenb.backends.fetch.spec import FetchSpec
from lanenb.datasets.cluster import submit_fetch_job
from lanenb.errors import UserError
from lanenb.jobs import JobRegistry, JobState, available_backends, get_job, list_jobs
from lanenb_trainer.data.check import check_dataset

PVC = "pvc-download-tusimple-data-0"
IMAGE = "registry.example/lanenb-trainer:0.1"


@pytest.fixture
def jobs(cluster, tmp_path):
    thread, _ = cluster
    controller = FakeJobController(thread.emulator, tmp_path / "volumes")
    thread.call(controller.attach)
    return thread, controller


def submit(kubeconfig, server_url, **kw):
    kw.setdefault("pvc", PVC)
    kw.setdefault("mirrors", [server_url])
    return submit_fetch_job("tusimple", image=IMAGE, kubeconfig=str(kubeconfig), storage_class="azurenetappfiles",
                            size="100Gi", default_urls=False, parts=["test"], **kw)


def test_the_job_runs_the_trainer_images_fetcher_into_the_pvc_with_progress_lines():
    job = build_fetch_job(FetchSpec(pvc=PVC, image="img:1", mirrors=["http://m"], parts=["test"], name="f"))
    pod = job["spec"]["template"]["spec"]
    assert job["apiVersion"] == "batch/v1" and pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["command"] == FETCH_ENTRYPOINT + [
        "tusimple", "--to", "/mnt/tusimple", "--downloads", "/mnt/.lanenb-downloads", "--progress-every", "5",
        "--parts", "test", "--mirror", "http://m"]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": PVC}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/mnt"}]
    pvc = build_fetch_pvc(PVC, size="100Gi", storage_class="azurenetappfiles", dataset="tusimple")
    assert pvc["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}},
                           "storageClassName": "azurenetappfiles"}


@pytest.mark.parametrize("call, message", [
    (lambda: build_fetch_pvc(PVC, size="100GB", storage_class=None, dataset="tusimple"), r"size='100GB'"),
    (lambda: build_fetch_pvc("Bad_Name", size="1Gi", storage_class=None, dataset="tusimple"), r"pvc 'Bad_Name'"),
    (lambda: FetchSpec(pvc=PVC, image=""), r"image=''"),
    (lambda: FetchSpec(pvc=PVC, image="i", parts=["all"]), r"part='all'"),
    (lambda: FetchSpec("mnist", pvc=PVC, image="i"), r"dataset='mnist'"),
    (lambda: FetchSpec(pvc="Bad_Name", image="i"), r"pvc='Bad_Name'"),
    (lambda: FetchSpec(pvc=PVC, image="i", size="100GB"), r"size='100GB'"),
    (lambda: FetchSpec(pvc=PVC, image="i", progress_every=-1), r"progress_every=-1"),
    (lambda: FetchSpec.from_dict({"pvc": PVC, "image": "i", "colour": 1}), r"\['colour'\]"),
])
def test_bad_values_are_named(call, message):
    with pytest.raises(UserError, match=message):
        call()


def test_the_fetch_is_a_lanenb_job_status_logs_wait_and_the_pvc_in_the_picker(jobs, kubeconfig, server):
    _thread, controller = jobs
    job = submit(kubeconfig, server.url)
    assert job.backend_name == "kubernetes-fetch" and job.handle["dataset_path"] == "/mnt/tusimple"
    again = get_job(job.name, registry=JobRegistry())  # a new kernel: everything from the registry row
    assert isinstance(again.spec, FetchSpec) and again.spec.pvc == PVC
    lines = [line.text for line in again.logs(follow=True)]
    assert again.wait(timeout=120, poll=0.2).state == JobState.SUCCEEDED
    assert get_job(job.name).status().state == JobState.SUCCEEDED
    progress = [ln for ln in lines if ln.startswith("download test_set.zip: ")]
    assert progress and "(100%)" in progress[-1]  # bytes, share, rate: the last line of the step
    result = next(json.loads(ln) for ln in lines if ln.startswith("{"))  # the fetcher's final JSON line
    assert result["root"].endswith(f"/{PVC}/tusimple") and result["parts"] == ["test"]  # the fake kubelet maps /mnt
    local = controller.volumes / "default" / PVC / "tusimple"
    assert (local / "test_label.json").is_file() and check_dataset(local) == []
    assert dataset_pvcs("default", kubeconfig=str(kubeconfig)) == [{
        "name": PVC, "dataset": "tusimple", "storage_class": "azurenetappfiles", "size": "100Gi",
        "access_modes": ["ReadWriteMany"], "phase": None}]
    from lanenb.backends.kubernetes.backend import KubernetesBackend

    assert PVC in KubernetesBackend(kubeconfig=kubeconfig).datasets()  # what the TrainPanel picker offers
    assert "kubernetes-fetch" not in available_backends()  # never offered as a training backend


def test_lanejobs_and_the_jobs_cli_show_the_fetch(jobs, kubeconfig, server, capsys):
    from lanenb.cli import main
    from lanenb.notebook.magics import JobTable

    job = submit(kubeconfig, server.url)
    assert main(["jobs", "wait", job.name, "--timeout", "120"]) == 0
    assert capsys.readouterr().out.strip() == f"{job.name}: succeeded"
    table = repr(JobTable(list_jobs()))
    row = next(ln for ln in table.splitlines() if job.name in ln)
    assert "kubernetes-fetch" in row and "succeeded" in row
    assert main(["jobs", "logs", job.name]) == 0
    assert "download test_set.zip: " in capsys.readouterr().out
    assert main(["jobs", "show", job.name]) == 0
    first, _, _ = capsys.readouterr().out.partition("\n")
    assert first.startswith("unknown: ")  # a fetch job has no training steps for the doctor to judge
    assert main(["jobs", "show", job.name, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["backend_detail"]["pvc"] == PVC and shown["spec"]["dataset"] == "tusimple"


def test_an_existing_pvc_is_used_as_it_is(jobs, kubeconfig, server):
    thread, _ = jobs
    with pytest.raises(FetchJobError, match=rf"pvc='{PVC}' does not exist in namespace 'default'"):
        submit(kubeconfig, server.url, create_pvc=False)
    thread.call(thread.emulator.create, PVCS, "default", {"metadata": {"name": PVC}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}})
    job = submit(kubeconfig, server.url, create_pvc=False)
    assert job.wait(timeout=120, poll=0.2).state == JobState.SUCCEEDED
    pvcs = thread.call(thread.emulator.list, PVCS, "default")
    assert [p["spec"]["resources"]["requests"]["storage"] for p in pvcs] == ["5Gi"]


def test_a_failed_fetch_says_why_with_the_fetchers_error_line(jobs, kubeconfig):
    empty = LoopbackServer({}).start()
    try:
        job = submit(kubeconfig, empty.url)
        status = job.wait(timeout=120, poll=0.2)
        assert status.state == JobState.FAILED
        assert status.reason.startswith("error: test_set.zip: not found at any URL")
        assert "BackoffLimitExceeded" in status.reason
        assert get_job(job.name).status().reason == status.reason  # recorded
        with pytest.raises(FetchJobError, match=r"failed: error: test_set\.zip: not found at any URL"):
            lanenb.fetch_to_pvc("tusimple", pvc="other-pvc", image=IMAGE, kubeconfig=str(kubeconfig),
                         mirrors=[empty.url], default_urls=False, parts=["test"], poll=0.2, timeout=120)
    finally:
        empty.stop()


def test_cancel_through_the_job_api_stops_the_fetch_and_frees_the_pvc(cluster, jobs, kubeconfig, archives):
    thread, controller = jobs
    hold = threading.Event()
    slow = LoopbackServer(archives)
    slow.faults.hold["test_set.zip"] = hold  # the download stays in progress until released
    slow.start()
    try:
        job = submit(kubeconfig, slow.url)
        first = next(ln.text for ln in job.logs(follow=True) if ln.text.startswith("download test_set.zip: "))
        assert "(0%)" in first  # the line of the step's start
        assert job.status().state == JobState.RUNNING
        with pytest.raises(FetchJobError, match=rf"fetch Job '{job.name}' is still filling pvc='{PVC}'"):
            submit(kubeconfig, slow.url)
        cluster[1].stop_delay = 1.0  # the kubelet takes a while to stop the pod: the Job is kept meanwhile
        assert job.cancel().state == JobState.CANCELLED
        assert get_job(job.name).status().state == JobState.CANCELLED
        assert controller.processes == {}  # the fetcher was killed when its pod was marked for deletion
        wait_for(lambda: thread.call(thread.emulator.get, JOBS, "default", job.name) is None, what="the Job to be gone")
        hold.set()
        again = submit(kubeconfig, slow.url)  # the claim is free again
        assert again.wait(timeout=120, poll=0.2).state == JobState.SUCCEEDED
    finally:
        hold.set()
        slow.stop()


def test_cli_cluster_follows_the_pod_log_and_detach_returns_at_once(jobs, kubeconfig, server, capsys, monkeypatch):
    from lanenb.cli import main

    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    base = ["data", "fetch", "tusimple", "--cluster", "--pvc", PVC, "--image", IMAGE, "--size", "1Gi",
            "--storage-class", "azurenetappfiles", "--parts", "test", "--mirror", server.url, "--no-default-urls"]
    assert main(base + ["--name", "fetch-one"]) == 0
    out = capsys.readouterr().out
    assert "submitted fetch-one: tusimple into PVC" in out and "at /mnt/tusimple" in out
    assert "download test_set.zip: " in out and "(100%)" in out  # the pod's progress lines, followed
    assert "fetch-one: succeeded" in out and f"--pvc {PVC}:/mnt --dataset /mnt/tusimple" in out
    assert get_job("fetch-one").spec.size == "1Gi"
    assert main(base + ["--name", "fetch-two", "--detach"]) == 0
    assert "lanenb jobs logs -f fetch-two" in capsys.readouterr().out
    assert get_job("fetch-two").wait(timeout=120, poll=0.2).state == JobState.SUCCEEDED


@pytest.mark.parametrize("extra, message", [
    (["--pvc", PVC, "--image", IMAGE, "--to", "/data"], "--to is a local directory"),
    (["--image", IMAGE], "--cluster needs --pvc NAME"),
    (["--pvc", PVC], "image=''"),
    (["--pvc", PVC, "--image", IMAGE, "--url", "nope.zip=http://x/nope.zip"], "'nope.zip' is not an archive"),
])
def test_cli_cluster_mistakes_are_named_before_any_request(extra, message, capsys, monkeypatch, tmp_path):
    from lanenb.cli import main

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))  # nothing is sent: no cluster needed
    monkeypatch.delenv("LANENB_IMAGE", raising=False)
    assert main(["data", "fetch", "tusimple", "--cluster", *extra]) == 2
    assert message in capsys.readouterr().err


def test_cli_without_cluster_refuses_cluster_flags(capsys, tmp_path):
    from lanenb.cli import main

    assert main(["data", "fetch", "tusimple", "--to", str(tmp_path / "t"), "--pvc", PVC]) == 2
    assert "--pvc need(s) --cluster" in capsys.readouterr().err
    assert main(["data", "fetch", "tusimple"]) == 2
    assert "--to DIR is required (or --cluster --pvc NAME)" in capsys.readouterr().err


def test_openshift_mode_fetch_pod_passes_the_restricted_level():
    from pod_security import restricted_violations

    from lanenb.backends.kubernetes.restricted import HOME

    def pod_of(job: dict) -> dict:
        return {"metadata": {"name": "fetch-pod"}, "spec": job["spec"]["template"]["spec"]}

    spec = FetchSpec(pvc=PVC, image="img:1", parts=["test"], name="f")
    root = pod_of(build_fetch_job(spec))
    assert any("runAsNonRoot" in v for v in restricted_violations(root))  # the root pod a restricted namespace refuses
    secure = pod_of(build_fetch_job(spec, openshift=True))
    assert restricted_violations(secure) == []
    container = secure["spec"]["containers"][0]
    assert {"name": "HOME", "value": HOME} in container["env"]  # the arbitrary UID's writable home
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/mnt", HOME}
    assert "runAsUser" not in secure["spec"]["securityContext"]  # the SCC picks the UID
    chosen = FetchSpec(pvc=PVC, image="img:1", parts=["test"], name="f", openshift=True)
    assert build_fetch_job(chosen) == build_fetch_job(spec, openshift=True)  # the spec's field is the default


@pytest.mark.parametrize("serves_openshift", [False, True], ids=["kubernetes", "openshift"])
def test_fetch_mode_follows_the_api_servers_groups_unless_set(jobs, kubeconfig, server, serves_openshift):
    from kube_emulator import SCCS

    thread, _ = jobs
    if serves_openshift:
        thread.call(thread.emulator.install, SCCS)
    auto = submit(kubeconfig, server.url, name="fetch-auto")
    forced = submit(kubeconfig, server.url, name="fetch-root", openshift=False, pvc="pvc-other")
    for job, expected in ((auto, serves_openshift), (forced, False)):
        created = thread.call(thread.emulator.get, JOBS, "default", job.name)
        context = created["spec"]["template"]["spec"].get("securityContext") or {}
        assert context.get("runAsNonRoot", False) is expected, job.name
        assert job.wait(timeout=120, poll=0.2).state == JobState.SUCCEEDED


@pytest.mark.parametrize("value", ["maybe", 2])
def test_a_bad_openshift_value_is_refused_naming_it(value):
    with pytest.raises(UserError, match=rf"openshift={value!r}"):
        FetchSpec(pvc=PVC, image="i", openshift=value)


def test_cli_openshift_flag_needs_cluster(capsys, tmp_path):
    from lanenb.cli import main

    assert main(["data", "fetch", "tusimple", "--to", str(tmp_path / "t"), "--openshift"]) == 2
    assert "--openshift need(s) --cluster" in capsys.readouterr().err


SIGNED = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE&X-Amz-Signature=5e1f0c9a8b7d6e5f4a3b"


def test_a_signed_url_travels_in_an_owned_secret_never_in_the_command_the_record_or_the_log(jobs, kubeconfig,
                                                                                             server):
    """Issue 43: a presigned URL is a credential. It reaches the fetcher through a Secret owned by the
    Job (deleted with it), never the pod's command (`kubectl get pods -o yaml`); the dataset's
    record on the shared PVC and the pod log keep it without its signature."""
    thread, controller = jobs
    urls = [f"{name}={server.url}/{name}?{SIGNED}" for name in ("test_set.zip", "test_label.json")]
    job = submit(kubeconfig, server.url, mirrors=[], urls=urls, name="fetch-signed")
    assert job.wait(timeout=120, poll=0.2).state == JobState.SUCCEEDED, "\n".join(l.text for l in job.logs())
    (made,) = [j for j in thread.call(lambda: thread.emulator.list(JOBS, "default")) if
               j["metadata"]["name"] == "fetch-signed"]
    container = made["spec"]["template"]["spec"]["containers"][0]
    assert SIGNED not in json.dumps(made) and "--url" not in container["command"]
    secret = thread.call(lambda: thread.emulator.get(SECRETS, "default", "fetch-signed-lanenb-urls"))
    assert secret["metadata"]["ownerReferences"][0]["uid"] == made["metadata"]["uid"]
    record = (controller.volumes / "default" / PVC / "tusimple" / ".lanenb-fetch.json").read_text()
    assert SIGNED not in record and "test_set.zip?<redacted>" in record
    assert not any(SIGNED in line.text for line in get_job("fetch-signed").logs())
