"""``lanenb notebook``: run one of the bundled notebooks headlessly (papermill), as CI does.

    lanenb notebook quickstart --out demo-nb      # notebooks/01-quickstart.ipynb -> demo-nb/01-quickstart.ipynb
    lanenb notebook kubernetes -p kubeconfig ~/.kube/config -p image registry/lanenb-trainer:0.1

The executed notebook keeps every output (charts, log tails, tables) as a viewer without a
kernel draws it: the widgets' PNG/text fallbacks, without the saved widget state nor the widget
views that would need it (``lanenb.cli.saved_notebook``; the quickstart: ~230 kB instead of
2.2 MB). ``--keep-widget-state`` keeps both, as papermill saves them by default. The command
prints where the notebook is and how to open it in JupyterLab.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from lanenb.cli import describe

# The Jupyter kernel the notebooks name (their ``metadata.kernelspec``) and headless runs use:
# this environment's Python, registered by scripts/install_lanenb.sh under a name of its own so
# that installing lanenb never replaces the user's default ``python3`` kernel.
KERNEL = "lanenb"
KERNEL_DISPLAY_NAME = "Python 3 (lanenb)"

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
    p.add_argument("--kernel", default=KERNEL, help=f"Jupyter kernel name (default {KERNEL}, the kernel "
                   "scripts/install_lanenb.sh registers)")
    p.add_argument("--keep-widget-state", action="store_true",
                   help="also save the widgets' state and views, as papermill does by default (MBs; "
                   "the PNG/text every viewer shows are saved either way)")
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


def kernel_manager_config() -> Any:
    """The kernel manager's settings for a headless run: CurveZMQ keys provisioned by the manager
    (``transport_encryption="auto"``), so the kernel's sockets are encrypted and ipykernel does not
    warn "Kernel is running over TCP without encryption" on every run. Where jupyter_client or
    libzmq cannot do it (older jupyter_client, pyzmq without libsodium), no settings: the run is
    as before, warning included."""
    import zmq
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    if "transport_encryption" not in KernelManager.class_trait_names() or not zmq.has("curve"):
        return Config()
    return Config({"KernelManager": {"transport_encryption": "auto"}})


def execute_headless(source: Path, output: Path, parameters: dict[str, Any], *, kernel: str = KERNEL,
                     cwd: Path | None = None, progress_bar: bool = True, keep_widget_state: bool = False) -> Path:
    """Execute ``source`` with papermill into ``output`` as ``lanenb notebook`` does, and save it
    for viewers without a kernel (``lanenb.cli.saved_notebook``) unless ``keep_widget_state``.

    Why here and not after the fact: the executed notebook is what users open, commit and share;
    it is rewritten even when a cell failed (papermill raises after saving it).

    Raises:
        papermill.exceptions.PapermillExecutionError: a cell failed (``output`` holds the error).
        jupyter_client.kernelspec.NoSuchKernel: no kernel named ``kernel`` is registered.
    """
    import papermill

    from lanenb.cli.saved_notebook import rewrite_for_headless_viewers

    try:
        papermill.execute_notebook(str(source), str(output), parameters=parameters, kernel_name=kernel,
                                   cwd=None if cwd is None else str(cwd), progress_bar=progress_bar,
                                   store_widget_state=keep_widget_state, config=kernel_manager_config())
    finally:
        if not keep_widget_state and output.is_file():
            rewrite_for_headless_viewers(output)
    return output


def cmd_notebook(args: argparse.Namespace) -> int:
    try:
        source = resolve_notebook(args.name)
        params = parse_parameters(args.parameter)
    except (FileNotFoundError, ValueError) as exc:
        print(f"lanenb notebook: error: {exc}", file=sys.stderr)
        return 2
    from jupyter_client.kernelspec import NoSuchKernel
    from papermill.exceptions import PapermillExecutionError

    out_dir = Path(args.out).expanduser().resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / source.name
    print(f"running {source} with {params or 'its default parameters'} (kernel {args.kernel}) in {out_dir}",
          flush=True)
    try:
        execute_headless(source, output, params, kernel=args.kernel, cwd=out_dir,
                         keep_widget_state=args.keep_widget_state)
    except PapermillExecutionError as exc:
        print(f"lanenb notebook: cell {exc.exec_count} failed: {exc.ename}: {exc.evalue}\n"
              f"the notebook with the error is {output}", file=sys.stderr)
        return 1
    except NoSuchKernel:
        fix = (f': register it with {sys.executable} -m ipykernel install --user --name {KERNEL} '
               f'--display-name "{KERNEL_DISPLAY_NAME}"') if args.kernel == KERNEL else ""
        print(f"lanenb notebook: error: no Jupyter kernel named {args.kernel!r}{fix}", file=sys.stderr)
        return 2
    print(f"executed notebook: {output}\nopen it: jupyter lab {output}   (as root: add --allow-root)")
    return 0
