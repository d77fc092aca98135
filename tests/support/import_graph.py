"""The import graph of lanenb and lanenb_trainer, read from the source with ``ast``.

Every runtime import counts, function-level ones included, and so does the package
``__init__`` an import passes through (``import a.b.c`` runs ``a`` and ``a.b`` first); imports
under ``if TYPE_CHECKING:`` are left out (they never run). ``from pkg import name`` counts as
importing ``pkg`` and, when ``name`` is a submodule, ``pkg.name``. ``importlib.import_module``
with a literal name counts too. A lazy ``"module:attr"`` registry string is not an import: it
is how a lower layer names a plug-in above it (papermill's entry points)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"lanenb": REPO / "lanenb", "lanenb_trainer": REPO / "trainer" / "lanenb_trainer"}


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for both packages (``pkg/__init__.py`` is ``pkg``)."""
    found: dict[str, Path] = {}
    for root in ROOTS.values():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
                    (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
                for stmt in node.body:
                    skipped.update(id(sub) for sub in ast.walk(stmt))
    return skipped


def _named(module: str, path: Path, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[:len(base) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        return [target] + [f"{target}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "import_module":
            return [node.args[0].value]
    return []


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of both packages its import statements run."""
    mods = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            for target in _named(module, path, node):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    step = ".".join(parts[:i])
                    # a package that encloses the importer is already running: only a direct
                    # import of it (``from lanenb.jobs import x`` inside lanenb.jobs.job) counts
                    encloses = module.startswith(step + ".")
                    if step in mods and step != module and (step == target or not encloses):
                        graph[module].add(step)
        graph.setdefault(module, set())
    return dict(graph)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
