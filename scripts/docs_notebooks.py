"""The docs site's notebooks: notebooks/*.ipynb executed once with their default parameters and
kept, outputs and all, in docs/notebooks/, so the site shows real outputs without running minutes
of training in every docs build (CI builds the site in seconds; tests/notebook executes the
notebooks themselves with papermill on every run).

    python3 scripts/docs_notebooks.py                 # quickstart, from-runai, scaling, sweep (~10 min, 2 cores)
    python3 scripts/docs_notebooks.py quickstart      # one of them
    python3 scripts/docs_notebooks.py --copy-only     # copy the sources again without running them

Each runs through ``lanenb notebook NAME`` (papermill) in a scratch folder with its own
``$LANENB_HOME``, so the job tables show this run only. ``02-kubernetes.ipynb`` needs a cluster
and is copied as it is (no outputs). ``lanenb notebook`` saves what a static page can draw
(``lanenb.cli.saved_notebook``: no widget state or views, the fallback PNG and text lanenb adds
for headless viewers, grids of camera frames as JPEG), so a copy stays around 200 KB. The
quickstart's final charts (a 2-rank run that learned) also become docs/images/quickstart-run.png,
the picture on the README and the site's home page. tests/docs checks that every copy holds
exactly its source's cells.
"""

from __future__ import annotations

import argparse
import base64
import copy
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from lanenb.cli.saved_notebook import for_headless_viewers

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "notebooks"
DEST = ROOT / "docs" / "notebooks"
RUN_PICTURE = ROOT / "docs" / "images" / "quickstart-run.png"
RUNNABLE = {"quickstart": "01-quickstart.ipynb", "from-runai": "03-from-runai.ipynb",
            "scaling": "04-scaling.ipynb", "sweep": "05-sweep.ipynb"}


def static_outputs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook as a static page can show it (``for_headless_viewers``, also for a copy that
    was not run here), papermill's per-cell timings dropped (they change on every run and say
    nothing to a reader)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
    nb.metadata.pop("papermill", None)
    return for_headless_viewers(nb)


def save_run_picture(nb: nbformat.NotebookNode, path: Path = RUN_PICTURE) -> None:
    """The final charts of the notebook's ``%lanetrain`` run (the PNG its live view leaves for
    headless viewers) as a picture file."""
    train = next(c for c in nb.cells if c.cell_type == "code" and "%lanetrain" in c.source)
    png = next(o["data"]["image/png"] for o in train.get("outputs", []) if "image/png" in o.get("data", {}))
    path.write_bytes(base64.b64decode(png))


def run(name: str, scratch: Path) -> Path:
    """Execute one bundled notebook with ``lanenb notebook`` in ``scratch``; the executed path."""
    env = dict(os.environ, LANENB_HOME=str(scratch / "home"), LANENB_PROGRESS="lines",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = scratch / "out"
    subprocess.run([sys.executable, "-m", "lanenb", "notebook", name, "--out", str(out)], env=env, check=True)
    return out / RUNNABLE[name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"notebooks to execute (default: {', '.join(RUNNABLE)})")
    parser.add_argument("--copy-only", action="store_true",
                        help="execute nothing; copy the notebooks that have no copy in docs/notebooks yet")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in RUNNABLE]
    if unknown:
        parser.error(f"unknown notebook {unknown[0]!r}; these run here: {', '.join(RUNNABLE)}")
    DEST.mkdir(parents=True, exist_ok=True)
    names = [] if args.copy_only else (args.names or list(RUNNABLE))
    executed = {RUNNABLE[n] for n in names}
    for source in sorted(SOURCES.glob("*.ipynb")):
        target = DEST / source.name
        if source.name in executed:
            with tempfile.TemporaryDirectory(prefix="lanenb-docs-nb-") as scratch:
                nb = nbformat.read(str(run(_name_of(source.name), Path(scratch))), as_version=4)
            if source.name == RUNNABLE["quickstart"]:
                save_run_picture(nb)
        elif not target.exists() or source.name not in RUNNABLE.values():
            nb = nbformat.read(str(source), as_version=4)  # no copy yet, or one that cannot run here
        else:
            continue  # an executed copy stays until its notebook is run again
        nbformat.write(static_outputs(nb), str(target))
        print(f"{target.relative_to(ROOT)}: {target.stat().st_size / 1024:.0f} KB", flush=True)
    return 0


def _name_of(filename: str) -> str:
    return next(n for n, f in RUNNABLE.items() if f == filename)


if __name__ == "__main__":
    raise SystemExit(main())
