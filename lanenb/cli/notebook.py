"""``lanenb notebook``: run one of the bundled notebooks headlessly (papermill), as CI does.

    lanenb notebook quickstart --out demo-nb      # notebooks/01-quickstart.ipynb -> demo-nb/01-quickstart.ipynb
    lanenb notebook kubernetes -p kubeconfig ~/.kube/config -p image registry/lanenb-trainer:0.1

The executed notebook keeps every output (charts, log tails, tables); the command prints
where it is and how to open it in JupyterLab.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from lanenb.cli import describe

NOTEBOOKS = {"quickstart": "01-quickstart.ipynb", "kubernetes": "02-kubernetes.ipynb",
             "from-runai": "03-from-runai.ipynb", "scaling": "04-scaling.ipynb",
             "sweep": "05-sweep.ipynb"}


def notebooks_dir() -> Path:
    """``notebooks/`` of the source tree lanenb runs from (an editable install or a clone)."""
    return Path(__file__).resolve().parents[2] / "notebooks"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("notebook", help="run a bundled notebook headlessly (papermill)",
                              description=describe(__doc__))
    p.add_argument("name", help=f"{' | '.join(NOTEBOOKS)}, or a path to an .ipynb")
    p.add_argument("--out", default="lanenb-notebooks", help="folder for the executed notebook and its files "
                   "(the notebook runs there; default ./lanenb-notebooks)")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="papermill parameter (VALUE is read as YAML: 3 -> int, true -> bool)")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    p.set_defaults(func=cmd_notebook)


def resolve_notebook(name: str) -> Path:
    if name in NOTEBOOKS:
        path = notebooks_dir() / NOTEBOOKS[name]
    else:
        path = Path(name).expanduser()
    if not path.is_file():
        known = ", ".join(NOTEBOOKS)
        raise FileNotFoundError(f"notebook {name!r} not found ({path}); known names: {known}, or give a path")
    return path


def parse_parameters(pairs: list[list[str]]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, value in pairs:
        if not name.isidentifier():
            raise ValueError(f"parameter name {name!r} is not a Python identifier")
        try:
            params[name] = yaml.safe_load(value) if value.strip() else value
        except yaml.YAMLError:
            params[name] = value
    return params


def cmd_notebook(args: argparse.Namespace) -> int:
    try:
        source = resolve_notebook(args.name)
        params = parse_parameters(args.parameter)
    except (FileNotFoundError, ValueError) as exc:
        print(f"lanenb notebook: error: {exc}", file=sys.stderr)
        return 2
    import papermill
    from papermill.exceptions import PapermillExecutionError

    out_dir = Path(args.out).expanduser().resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / source.name
    print(f"running {source} with {params or 'its default parameters'} (kernel {args.kernel}) in {out_dir}",
          flush=True)
    try:
        papermill.execute_notebook(str(source), str(output), parameters=params, kernel_name=args.kernel,
                                   cwd=str(out_dir), progress_bar=True)
    except PapermillExecutionError as exc:
        print(f"lanenb notebook: cell {exc.exec_count} failed: {exc.ename}: {exc.evalue}\n"
              f"the notebook with the error is {output}", file=sys.stderr)
        return 1
    print(f"executed notebook: {output}\nopen it: jupyter lab {output}   (as root: add --allow-root)")
    return 0
