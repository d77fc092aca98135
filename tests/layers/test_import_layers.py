"""The layers of docs/ARCHITECTURE.md, enforced: no import cycle anywhere in lanenb or
lanenb_trainer, and every import points down the layer table (or stays inside its own room).

The table below is the one in docs/ARCHITECTURE.md ("Layers"); a test checks they agree."""

from __future__ import annotations

import itertools
import re

import pytest
from import_graph import REPO, cycles, import_graph

# bottom first; each entry: (layer, rooms). A room is a package or module and everything in it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("trainer", ("lanenb_trainer",)),
    ("base", ("lanenb.errors", "lanenb.plugins", "lanenb.home", "lanenb.version", "lanenb.tables")),
    ("tools", ("lanenb.launch", "lanenb.kube", "lanenb.charts", "lanenb.inference")),
    ("contract", ("lanenb.contract",)),
    ("stores", ("lanenb.registry", "lanenb.snapshots")),
    ("backends", ("lanenb.backends",)),
    ("jobs", ("lanenb.jobs",)),
    ("analysis", ("lanenb.analysis",)),
    ("workflows", ("lanenb.workflows", "lanenb.datasets", "lanenb.trackers", "lanenb.sweeps", "lanenb.team")),
    ("commands", ("lanenb.commands",)),
    ("faces", ("lanenb.notebook", "lanenb.server", "lanenb.cli")),
    ("top", ("lanenb", "lanenb.__main__")),
]


def room_of(module: str) -> tuple[int, str]:
    """(layer index, room) of a module: the longest room name that is it or encloses it."""
    best: tuple[int, str] | None = None
    for level, (_, rooms) in enumerate(LAYERS):
        for room in rooms:
            if (module == room or module.startswith(room + ".")) and (best is None or len(room) > len(best[1])):
                best = (level, room)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add its room to LAYERS and docs/ARCHITECTURE.md")
    return best


GRAPH = import_graph()


def test_every_module_has_a_layer():
    for module in GRAPH:
        room_of(module)


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_imports_only_point_down():
    wrong = []
    for module, targets in sorted(GRAPH.items()):
        level, room = room_of(module)
        for target in sorted(targets):
            t_level, t_room = room_of(target)
            if t_room == room or t_level < level:
                continue
            how = "up" if t_level > level else "sideways"
            wrong.append(f"{module} ({LAYERS[level][0]}) imports {target} ({LAYERS[t_level][0]}): {how}")
    assert not wrong, "imports that do not point down:\n" + "\n".join(wrong)


def test_architecture_doc_lists_the_same_layers():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    doc = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        doc.append((cells[1], tuple(re.findall(r"`([\w.]+)`", cells[2]))))
    assert doc == LAYERS


@pytest.mark.parametrize("code, expected", [
    ("a -> b -> a", [["a", "b"]]),
    ("a -> b -> c", []),
    ("a -> b -> c -> a; d -> a", [["a", "b", "c"]]),
])
def test_cycle_finder_finds_exactly_the_cycles(code, expected):
    graph: dict[str, set[str]] = {}
    for chain in code.split(";"):
        names = [n.strip() for n in chain.split("->")]
        for a, b in itertools.pairwise(names):
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    assert cycles(graph) == expected


def test_reader_counts_function_level_imports_and_skips_type_checking(tmp_path, monkeypatch):
    import import_graph as ig

    pkg = tmp_path / "lanenb"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from lanenb.sub.a import f\n")
    (pkg / "sub" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lanenb import b\n"
                                      "def f():\n    from lanenb.sub import c\n")
    (pkg / "b.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from . import a\n")
    monkeypatch.setattr(ig, "ROOTS", {"lanenb": pkg})
    graph = ig.import_graph()
    assert graph["lanenb.sub.a"] == {"lanenb.sub", "lanenb.sub.c"}   # function-level counted, TYPE_CHECKING not
    assert graph["lanenb.sub.c"] == {"lanenb.sub", "lanenb.sub.a"}   # ``from . import a`` runs the package too
    assert ig.cycles(graph) == [["lanenb.sub", "lanenb.sub.a", "lanenb.sub.c"]]
