"""The test harness itself: the kmock extensions the real ``kubernetes`` client needs.

If these break, the backend tests would pass or fail for the wrong reasons."""

from __future__ import annotations

import json
import urllib.request

import pytest
from kube_emulator import MPIJOBS, PODS, Fault, Rule, label_match, merge_patch
from kubernetes import client, config, watch


@pytest.fixture
def cluster(bare_cluster):
    return bare_cluster


@pytest.fixture
def api(bare_cluster, tmp_path):
    return config.new_client_from_config(str(bare_cluster[0].write_kubeconfig(tmp_path / "kubeconfig")))


def _get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url) as resp:
        return resp.status, resp.headers["Content-Type"], resp.read()


def test_discovery_with_trailing_slashes(cluster, api):
    thread, _ = cluster
    assert client.VersionApi(api).get_code().major == "1"  # GET /version/
    groups = [g.name for g in client.ApisApi(api).get_api_versions().groups]  # GET /apis/
    assert "kubeflow.org" in groups
    core = client.CoreV1Api(api).get_api_resources()  # GET /api/v1/
    assert core.group_version == "v1" and "pods" in {r.name for r in core.resources}
    status, _, body = _get(thread.url + "/apis/kubeflow.org/v2beta1/")
    assert status == 200 and "mpijobs" in {r["name"] for r in json.loads(body)["resources"]}


def test_create_answers_201_with_server_fields(cluster, api):
    thread, _ = cluster
    custom = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs",
                                                     {"metadata": {"name": "a"}, "spec": {}})
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"].isdigit() and meta["creationTimestamp"].endswith("Z")
    assert created["kind"] == "MPIJob" and meta["namespace"] == "default"
    pod = client.CoreV1Api(api).create_namespaced_pod(
        "default", {"metadata": {"generateName": "a-launcher-"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert pod.metadata.name.startswith("a-launcher-") and len(pod.metadata.name) == len("a-launcher-") + 5
    assert ("POST", "/api/v1/namespaces/default/pods") in thread.emulator.served
    with pytest.raises(client.ApiException) as err:
        custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs",
                                               {"metadata": {"name": "a"}})
    assert err.value.status == 409


def test_lists_have_kind_and_honour_selectors(cluster, api):
    core = client.CoreV1Api(api)
    for name, role in (("j-launcher-x", "launcher"), ("j-worker-0", "worker"), ("k-worker-0", "worker")):
        core.create_namespaced_pod("default", {"metadata": {"name": name, "labels": {
            "training.kubeflow.org/job-name": name[0], "training.kubeflow.org/job-role": role}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}})
    listing = core.list_namespaced_pod("default", label_selector="training.kubeflow.org/job-name=j",
                                       _preload_content=False)
    data = json.loads(listing.data)
    assert data["kind"] == "PodList"
    assert sorted(p["metadata"]["name"] for p in data["items"]) == ["j-launcher-x", "j-worker-0"]
    names = [p.metadata.name for p in core.list_namespaced_pod(
        "default", label_selector="training.kubeflow.org/job-role in (worker),training.kubeflow.org/job-name!=j").items]
    assert names == ["k-worker-0"]
    by_field = core.list_namespaced_pod("default", field_selector="metadata.name=j-worker-0").items
    assert [p.metadata.name for p in by_field] == ["j-worker-0"]
    assert label_match("a,!b", {"a": "1"}) and not label_match("a,!b", {"a": "1", "b": "2"})


def test_put_replaces_and_checks_resource_version(cluster, api):
    custom = client.CustomObjectsApi(api)
    obj = custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs",
                                                 {"metadata": {"name": "r"}, "spec": {"a": 1, "b": 2}})
    obj["spec"] = {"c": 3}
    replaced = custom.replace_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", "r", obj)
    assert replaced["spec"] == {"c": 3}  # replaced, not merged
    assert int(replaced["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    with pytest.raises(client.ApiException) as err:  # stale resourceVersion
        custom.replace_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", "r", obj)
    assert err.value.status == 409
    patched = custom.patch_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", "r",
                                                    {"spec": {"d": 4}})
    assert patched["spec"] == {"c": 3, "d": 4}
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None}}) == {"a": {"c": 2}}


def test_pod_log_is_text_and_follows(cluster, api):
    thread, _ = cluster
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", {"metadata": {"name": "p"},
                                           "spec": {"containers": [{"name": "c", "image": "i"}]}})
    log = thread.call(thread.emulator.pod_log, "default", "p", "c")
    thread.call(lambda: [log.append(f"l{i}") for i in range(3)])
    status, ctype, body = _get(thread.url + "/api/v1/namespaces/default/pods/p/log")
    assert status == 200 and ctype.startswith("text/plain") and body == b"l0\nl1\nl2\n"
    resp = core.read_namespaced_pod_log("p", "default", follow=True, _preload_content=False)
    thread.loop.call_later(0.2, lambda: (log.append("l3"), log.close()))
    assert list(watch.watch.iter_resp_lines(resp)) == ["l0", "l1", "l2", "l3"]
    stamped = core.read_namespaced_pod_log("p", "default", timestamps=True, tail_lines=1)
    assert stamped.endswith(" l3\n") and stamped[:4].isdigit()


def test_watch_resumes_from_resource_version_and_honours_timeout(cluster, api):
    thread, _ = cluster
    custom = client.CustomObjectsApi(api)
    first = custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs",
                                                   {"metadata": {"name": "w1"}, "spec": {}})
    custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs",
                                           {"metadata": {"name": "w2"}, "spec": {}})
    events = list(watch.Watch().stream(custom.list_namespaced_custom_object, "kubeflow.org", "v2beta1", "default",
                                       "mpijobs", resource_version=first["metadata"]["resourceVersion"],
                                       timeout_seconds=1))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "w2")]
    thread.emulator.add_fault(Fault(lambda r: r.params.get("watch") == "true", status=410))
    with pytest.raises(client.ApiException) as err:
        list(watch.Watch().stream(custom.list_namespaced_custom_object, "kubeflow.org", "v2beta1", "default",
                                  "mpijobs", resource_version="1", timeout_seconds=1))
    assert err.value.status == 410


def test_delete_cascades_to_owned_pods(cluster, api):
    thread, _ = cluster
    custom = client.CustomObjectsApi(api)
    job = custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs",
                                                 {"metadata": {"name": "d"}, "spec": {}})
    client.CoreV1Api(api).create_namespaced_pod("default", {"metadata": {"name": "d-worker-0", "ownerReferences": [
        {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "d", "uid": job["metadata"]["uid"]}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]}})
    custom.delete_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", "d",
                                           propagation_policy="Foreground")
    assert thread.call(thread.emulator.get, MPIJOBS, "default", "d") is None
    assert thread.call(thread.emulator.get, PODS, "default", "d-worker-0") is None


def test_a_uid_precondition_that_does_not_match_is_a_conflict(cluster, api):
    """As the apiserver: DeleteOptions.preconditions.uid, or metadata.uid in a patch, naming
    another object of the same name is 409 Conflict and leaves the object alone."""
    thread, _ = cluster
    custom = client.CustomObjectsApi(api)
    job = custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs",
                                                 {"metadata": {"name": "p"}, "spec": {}})
    stale = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-" + job["metadata"]["uid"]))
    with pytest.raises(client.ApiException) as err:
        custom.delete_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", "p", body=stale)
    assert err.value.status == 409 and "Precondition failed: UID in precondition" in err.value.body
    with pytest.raises(client.ApiException) as err:
        custom.patch_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", "p",
                                              {"metadata": {"uid": "someone-else"}, "spec": {"x": 1}})
    assert err.value.status == 409
    assert thread.call(thread.emulator.get, MPIJOBS, "default", "p")["spec"] == {}
    mine = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=job["metadata"]["uid"]))
    custom.delete_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", "p", body=mine)
    assert thread.call(thread.emulator.get, MPIJOBS, "default", "p") is None


def test_rbac_refuses_with_the_apiservers_403_and_answers_access_reviews_from_the_same_rules(cluster, tmp_path):
    thread, _ = cluster
    thread.emulator.tokens = {"t-ann": "ann"}
    thread.emulator.rbac = {"ann": [Rule.of("get list watch", "pods pods/log", "team-a"),
                                    Rule.of("delete", "mpijobs", "team-a")]}
    api = config.new_client_from_config(str(thread.write_kubeconfig(tmp_path / "kc", token="t-ann")))
    core = client.CoreV1Api(api)
    assert core.list_namespaced_pod("team-a").items == []
    with pytest.raises(client.ApiException) as err:
        core.list_namespaced_pod("team-b")
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == ('pods is forbidden: User "ann" cannot list resource "pods" in '
                                                     'API group "" in the namespace "team-b"')
    with pytest.raises(client.ApiException) as err:
        core.list_pod_for_all_namespaces()
    assert "at the cluster scope" in json.loads(err.value.body)["message"]
    auth = client.AuthorizationV1Api(api)

    def can(verb: str, resource: str, namespace: str | None) -> bool:
        attrs = {"verb": verb, "resource": resource, "namespace": namespace}
        return auth.create_self_subject_access_review({"spec": {"resourceAttributes": attrs}}).status.allowed

    assert can("delete", "mpijobs", "team-a") and not can("delete", "mpijobs", "team-b")
    assert not can("list", "nodes", None) and can("get", "pods", "team-a")
