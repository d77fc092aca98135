"""deploy/: the admin manifests parse, pin the versions the issue names, and the submitter Role
grants every request the backend really makes (recorded by the emulator during a job's life)."""

from __future__ import annotations

import re
import sys
from urllib.parse import parse_qs, urlsplit

import yaml
from k8s_harness import REPO, add_pvc, warm_up

from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState

DEPLOY = REPO / "deploy"


def load(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def rules_allow(rules: list[dict], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


def request_to_permission(method: str, path_qs: str) -> tuple[str, str, str] | None:
    """(apiGroup, resource[/subresource], verb) as the apiserver's authorizer sees a request."""
    url = urlsplit(path_qs)
    m = re.match(r"^/(?:api/v1|apis/([^/]+)/[^/]+)/namespaces/[^/]+/([^/]+)(?:/([^/]+))?(?:/([^/]+))?$", url.path)
    if not m:
        return None  # discovery (/version, /apis/...): allowed to every authenticated user
    group, resource, name, sub = m.group(1) or "", m.group(2), m.group(3), m.group(4)
    query = parse_qs(url.query)
    if method == "GET":
        verb = "watch" if query.get("watch") == ["true"] else ("get" if name else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return group, resource + (f"/{sub}" if sub else ""), verb


def test_manifests_parse_and_pin_versions():
    operator = load("mpi-operator/kustomization.yaml")[0]
    assert any("mpi-operator" in r and r.endswith("?ref=v0.8.2") for r in operator["resources"])
    snapshots = load("csi-snapshots/kustomization.yaml")[0]
    assert any("client/config/crd" in r for r in snapshots["resources"])
    assert any("snapshot-controller" in r for r in snapshots["resources"])
    kinds = sorted(d["kind"] for d in load("rbac-submitter.yaml") + load("rbac-trainer.yaml"))
    assert kinds == ["Role", "Role", "RoleBinding", "RoleBinding", "ServiceAccount"]
    # namespaced bindings (issue 43): only nodes, which belong to no namespace, are bound cluster-wide
    viewer = load("rbac-team-viewer.yaml")
    assert sorted(d["kind"] for d in viewer) == ["ClusterRole", "ClusterRole", "ClusterRoleBinding", "RoleBinding"]
    (cluster_wide,) = [d for d in viewer if d["kind"] == "ClusterRoleBinding"]
    granted = next(d for d in viewer if d["metadata"]["name"] == cluster_wide["roleRef"]["name"]
                   and d["kind"] == "ClusterRole")
    assert [r["resources"] for r in granted["rules"]] == [["nodes"]]
    assert not any("pods/log" in r["resources"] for d in viewer if d["kind"] == "ClusterRole" for r in d["rules"])
    assert sorted(d["kind"] for d in load("rbac-team-viewer-logs.yaml")) == ["ClusterRole", "RoleBinding"]
    assert "kubectl apply --server-side -k deploy/mpi-operator" in (DEPLOY / "README.md").read_text()


def test_trainer_service_account_may_snapshot_volumes():
    docs = load("rbac-trainer.yaml")
    role = next(d for d in docs if d["kind"] == "Role")
    binding = next(d for d in docs if d["kind"] == "RoleBinding")
    account = next(d for d in docs if d["kind"] == "ServiceAccount")
    assert rules_allow(role["rules"], "snapshot.storage.k8s.io", "volumesnapshots", "create")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_submitter_role_covers_every_request_of_a_job_lifecycle(cluster, backend):
    thread, fake = cluster
    counter = "import time\nfor i in range(30):\n print(i, flush=True)\n time.sleep(0.05)"
    fake.rewrite_argv = lambda argv: [sys.executable, "-c", counter]
    spec = TrainSpec(dataset="/d", backend="kubernetes", image="img:1", name="lane-rbac", volumes=["data:/d"])
    add_pvc(thread)
    warm_up(backend)
    handle = backend.submit(spec)
    assert [s.state for s in backend.watch(spec, handle, timeout=20)][-1] == JobState.SUCCEEDED
    list(backend.logs(spec, handle, follow=True))
    backend.describe(spec, handle)
    backend.logs(spec, handle, worker=0)
    backend.suspend(spec, handle)
    backend.resume(spec, handle)  # --resume and a fresh launcher Job (deletes the old one)
    backend.cancel(spec, handle)
    rules = next(d for d in load("rbac-submitter.yaml") if d["kind"] == "Role")["rules"]
    needed = {p for p in (request_to_permission(m, q) for m, q in thread.emulator.served) if p}
    assert {("kubeflow.org", "mpijobs", v) for v in ("create", "get", "list", "watch", "patch", "delete")} <= needed
    missing = [p for p in needed if not rules_allow(rules, *p)]
    assert missing == []


def any_scope_permission(method: str, path_qs: str) -> tuple[str, str, str] | None:
    """``request_to_permission`` for namespaced and cluster-wide paths (``/api/v1/nodes``,
    ``/apis/kubeflow.org/v2beta1/mpijobs``: the team view reads across namespaces)."""
    found = request_to_permission(method, path_qs)
    if found is not None:
        return found
    url = urlsplit(path_qs)
    m = re.match(r"^/(?:api/v1|apis/([^/]+)/[^/]+)/([^/]+)(?:/([^/]+))?$", url.path)
    if not m or m.group(2) == "namespaces":
        return None
    verb = "watch" if parse_qs(url.query).get("watch") == ["true"] else ("get" if m.group(3) else "list")
    return (m.group(1) or "", m.group(2), verb) if method == "GET" else (m.group(1) or "", m.group(2), method)


def test_team_viewer_role_covers_every_request_of_the_team_view(tmp_path):
    """Everything ``%lanejobs --team`` asks the API server while it lists and watches the team's
    cluster is granted by deploy/rbac-team-viewer.yaml, and it grants nothing but reads."""
    from team_scenario import LEAD, kubeconfig_for, team_cluster

    from lanenb.kube.client import load_clients
    from lanenb.team.collector import TeamCollector

    with team_cluster(rbac=False) as thread:
        thread.emulator.served.clear()
        clients = load_clients(kubeconfig=str(kubeconfig_for(thread, tmp_path, LEAD)))
        collector = TeamCollector(clients, None, user=LEAD).start(watch=True)
        try:
            assert collector.view().to_dict()["jobs"]
        finally:
            collector.close()
    rules = [r for f in ("rbac-team-viewer.yaml", "rbac-team-viewer-logs.yaml") for d in load(f)
             if d["kind"] == "ClusterRole" for r in d["rules"]]
    needed = {p for p in (any_scope_permission(m, q) for m, q in thread.emulator.served) if p}
    needed.discard(("authorization.k8s.io", "selfsubjectaccessreviews", "POST"))  # system:basic-user's
    assert ("kubeflow.org", "mpijobs", "list") in needed and ("", "nodes", "list") in needed
    assert [p for p in needed if not rules_allow(rules, *p)] == []
    assert {v for r in rules for v in r["verbs"]} <= {"get", "list", "watch"}
