"""Backend knowledge lives in the backends' rooms and the registry: outside ``lanenb/backends/``
and ``lanenb/contract/backends.py`` no code branches on, looks up or reads a built-in backend by
its name (a string literal ``"kubernetes"``, ``"azureml"``, ``"k8s"``, or ``spec.k8s`` /
``azureml=`` in code). Prose in docstrings and messages may name them."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"kubernetes", "azureml", "k8s"}
ALLOWED_ROOMS = (
    "lanenb/backends/", "lanenb/contract/backends.py",
    # rooms about the platforms themselves, not about where a job runs: the Kubernetes client
    # plumbing (it imports the SDK module ``kubernetes``) and the team view of a cluster's and an
    # AzureML workspace's queues
    "lanenb/kube/", "lanenb/team/",
)
# what remains, each for a reason: (path, the name) -> why
ALLOWED = {
    # snapshot stores are a registry of their own, whose names happen to match a backend's
    ("lanenb/snapshots/__init__.py", "kubernetes"): "the snapshot store registry (a store name)",
    ("lanenb/snapshots/csi.py", "kubernetes"): "the CSI store's registered name",
    ("lanenb/snapshots/csi.py", "k8s"): "the kubernetes client module's usual alias",
    ("lanenb/cli/notebook.py", "kubernetes"): "a tutorial notebook's name",
}


def uses(path: Path, names: set[str] = NAMES) -> set[str]:
    """The backend names ``path``'s code uses: exact string literals and identifiers (not prose)."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.NAME and tok.string in names:
            found.add(tok.string)
        elif tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):  # an f-string
                continue
            if value in names:
                found.add(value)
    return found


def test_backend_names_appear_only_in_the_backends_the_registry_and_the_allow_list():
    seen = set()
    for path in sorted((ROOT / "lanenb").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(ALLOWED_ROOMS):
            continue
        seen |= {(rel, name) for name in uses(path)}
    assert seen - set(ALLOWED) == set(), "backend names outside lanenb/backends/ and the registry"
    assert set(ALLOWED) - seen == set(), "allow-list entries no longer needed: remove them"


def test_the_toy_plugin_names_its_backend_only_in_its_own_files():
    toy = Path(__file__).parent / "toy_slurm"
    assert {p.name for p in toy.iterdir() if p.suffix == ".py"} == {"__init__.py", "backend.py"}
    assert [p for p in (ROOT / "lanenb").rglob("*.py") if uses(p, {"slurm"})] == []
