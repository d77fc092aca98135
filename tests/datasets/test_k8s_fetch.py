"""The cluster fetch: a PVC + ``batch/v1`` Job through the real kubernetes client to the emulator,
whose fake Job controller really runs the Job's command against the loopback HTTP server."""

from __future__ import annotations

import pytest

from k8s_fetch_support import FakeJobController
from kube_emulator import JOBS, PVCS
from lanenb.datasets.k8s_fetch import (FETCH_ENTRYPOINT, FetchJobError, build_fetch_job, build_fetch_pvc,
                                       cancel_fetch_job, dataset_pvcs, fetch_job_status, submit_fetch_job,
                                       wait_fetch_job)
from lanenb.errors import UserError
from lanenb_trainer.data.labels import check_dataset
from fetch_support import LoopbackServer

PVC = "pvc-download-tusimple-data-0"


@pytest.fixture
def jobs(cluster, tmp_path):
    thread, _ = cluster
    controller = FakeJobController(thread.emulator, tmp_path / "volumes")
    thread.call(controller.attach)
    return thread, controller


def submit(kubeconfig, server_url, **kw):
    kw.setdefault("pvc", PVC)
    return submit_fetch_job("tusimple", image="registry.example/lanenb-trainer:0.1", kubeconfig=str(kubeconfig),
                            storage_class="azurenetappfiles", size="100Gi", mirrors=[server_url],
                            default_urls=False, parts=["test"], **kw)


def test_the_job_runs_the_trainer_images_fetcher_into_the_pvc():
    job = build_fetch_job("tusimple", PVC, image="img:1", mirrors=["http://m"], parts=["test"])
    pod = job["spec"]["template"]["spec"]
    assert job["apiVersion"] == "batch/v1" and pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["command"] == FETCH_ENTRYPOINT + [
        "tusimple", "--to", "/mnt/tusimple", "--downloads", "/mnt/.lanenb-downloads", "--quiet",
        "--parts", "test", "--mirror", "http://m"]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": PVC}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/mnt"}]
    pvc = build_fetch_pvc(PVC, size="100Gi", storage_class="azurenetappfiles", dataset="tusimple")
    assert pvc["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}},
                           "storageClassName": "azurenetappfiles"}


@pytest.mark.parametrize("call, message", [
    (lambda: build_fetch_pvc(PVC, size="100GB", storage_class=None, dataset="tusimple"), r"size='100GB'"),
    (lambda: build_fetch_pvc("Bad_Name", size="1Gi", storage_class=None, dataset="tusimple"), r"pvc 'Bad_Name'"),
    (lambda: build_fetch_job("tusimple", PVC, image=""), r"image=''"),
    (lambda: build_fetch_job("tusimple", PVC, image="i", parts=["all"]), r"part='all'"),
    (lambda: build_fetch_job("mnist", PVC, image="i"), r"dataset='mnist'"),
])
def test_bad_values_are_named(call, message):
    with pytest.raises(UserError, match=message):
        call()


def test_submit_creates_the_pvc_and_the_job_fills_it(jobs, kubeconfig, server):
    thread, controller = jobs
    handle = submit(kubeconfig, server.url)
    assert wait_fetch_job(handle, kubeconfig=str(kubeconfig), poll=0.2, timeout=120) == "Succeeded"
    local = controller.volumes / "default" / PVC / "tusimple"
    assert (local / "test_label.json").is_file() and check_dataset(local) == []
    assert handle.dataset_path == "/mnt/tusimple"
    listed = dataset_pvcs("default", kubeconfig=str(kubeconfig))
    assert listed == [{"name": PVC, "dataset": "tusimple", "storage_class": "azurenetappfiles", "size": "100Gi",
                       "access_modes": ["ReadWriteMany"], "phase": None}]
    from lanenb.jobs.backends.kubernetes import KubernetesBackend

    assert PVC in KubernetesBackend(kubeconfig=kubeconfig).datasets()  # the TrainPanel picker's list


def test_an_existing_pvc_is_used_as_it_is(jobs, kubeconfig, server):
    thread, _ = jobs
    with pytest.raises(FetchJobError, match=rf"pvc='{PVC}' does not exist in namespace 'default'"):
        submit(kubeconfig, server.url, create_pvc=False)
    thread.call(thread.emulator.create, PVCS, "default", {"metadata": {"name": PVC}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}}})
    handle = submit(kubeconfig, server.url, create_pvc=False)
    assert wait_fetch_job(handle, kubeconfig=str(kubeconfig), poll=0.2, timeout=120) == "Succeeded"
    pvcs = thread.call(thread.emulator.list, PVCS, "default")
    assert [p["spec"]["resources"]["requests"]["storage"] for p in pvcs] == ["5Gi"]


def test_a_failed_fetch_says_why_with_the_fetchers_error_line(jobs, kubeconfig):
    empty = LoopbackServer({}).start()
    try:
        handle = submit(kubeconfig, empty.url)
        with pytest.raises(FetchJobError, match=r"failed: BackoffLimitExceeded.*pod log: error: test_set\.zip: "
                                                r"not found at any URL"):
            wait_fetch_job(handle, kubeconfig=str(kubeconfig), poll=0.2, timeout=120)
    finally:
        empty.stop()


def test_a_second_job_for_the_same_pvc_is_refused_and_cancel_removes_the_job(jobs, kubeconfig, server):
    thread, _ = jobs
    handle = submit(kubeconfig, server.url)
    with pytest.raises(FetchJobError, match=r"a Job 'fetch-tusimple-pvc-download-tusimple-data-0' exists already"):
        submit(kubeconfig, server.url)
    wait_fetch_job(handle, kubeconfig=str(kubeconfig), poll=0.2, timeout=120)
    cancel_fetch_job(handle, kubeconfig=str(kubeconfig))
    assert thread.call(thread.emulator.get, JOBS, "default", handle.name) is None
    assert fetch_job_status(handle, kubeconfig=str(kubeconfig)) == "Lost"
