"""The snapshot actions defined once, for ``lanenb snap ...`` and ``%lanesnap ...``.

``add_snap_arguments(parser)`` adds the sub-commands to any ``argparse`` parser (IPython's
``MagicArgumentParser`` is one); ``run_snap(args)`` does the action and returns what to show:
a ``Table`` or a line of text. The table of versions joins the store's snapshots with the job
registry's links (which job made it, and its accuracy).
"""

from __future__ import annotations

import argparse
import html
import os
from typing import Any, TypeVar

from lanenb.snapshots.base import Snapshot, SnapshotInputError, fmt_size
from lanenb.tables import Table

__all__ = ["add_snap_arguments", "run_snap", "versions_table", "snapshot_job", "EMPTY_HINT"]

# What an empty list says: words, then commands. In HTML each command is code that never
# wraps (a narrow panel broke "--snapshot" after its first hyphen); as text, the plain line.
_EMPTY_PARTS = (("no snapshots yet (", False), ("lanenb snap create DIR", True), (", or train with ", False),
                ("--snapshot", True), (")", False))
EMPTY_HINT = "".join(text for text, _ in _EMPTY_PARTS)
EMPTY_HINT_HTML = "<i>" + "".join(
    f"<code style='white-space:nowrap'>{html.escape(text)}</code>" if code else html.escape(text)
    for text, code in _EMPTY_PARTS) + "</i>"


class _VersionsTable(Table):
    """A ``Table`` whose empty hint keeps its commands whole in HTML."""

    def html(self) -> str:
        return EMPTY_HINT_HTML if not self.rows else super().html()


_Parser = TypeVar("_Parser", bound=argparse.ArgumentParser)


def add_snap_arguments(parser: _Parser) -> _Parser:
    """Add the snapshot actions to ``parser`` and return it, typed as given (``%lanesnap`` passes
    IPython's ``MagicArgumentParser``, ``lanenb snap`` a plain one)."""
    parser.add_argument("--backend", default="local", help="snapshot store: local (default) | kubernetes")
    parser.add_argument("--namespace", default=None, help="Kubernetes namespace (kubernetes store)")
    parser.add_argument("--context", default=None, help="kubeconfig context (kubernetes store)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    p = sub.add_parser("list", help="versions, oldest first, with job, accuracy, date and size")
    p.add_argument("volume", nargs="?", help="only this directory / PVC")
    p.add_argument("--label", "-l", action="append", default=[], metavar="KEY=VALUE", help="only with this label")
    p.add_argument("--job", help="only the snapshots this job made")
    p = sub.add_parser("show", help="one snapshot: labels, size, files")
    p.add_argument("id")
    p = sub.add_parser("diff", help="files added, removed and changed between two snapshots")
    p.add_argument("a")
    p.add_argument("b")
    p = sub.add_parser("restore", help="restore into a NEW directory / PVC (never overwrites)")
    p.add_argument("id")
    p.add_argument("target", help="the new directory or PVC name")
    p = sub.add_parser("retrain", help="restore a dataset snapshot into a NEW volume and train on it with the "
                                       "settings of the run that made it")
    p.add_argument("id")
    p.add_argument("--to", required=True, metavar="NEW", help="the new directory or PVC name")
    p.add_argument("--name", default=None, help="the new job's name (default: generated)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--processes", "-np", type=int, default=None)
    p.add_argument("--secret", "-e", action="append", default=[], metavar="NAME[=VALUE]",
                   help="a secret env variable of the run, given again (the registry keeps no secret value); "
                        "NAME alone takes it from this shell's environment, which keeps it out of the process list")
    p = sub.add_parser("delete", help="delete one snapshot")
    p.add_argument("id")
    p = sub.add_parser("verify", help="check that a snapshot can be restored")
    p.add_argument("id")
    p = sub.add_parser("create", help="snapshot a directory / PVC now")
    p.add_argument("volume")
    p.add_argument("--label", "-l", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--name", default=None)
    return parser


def _store(args: argparse.Namespace) -> Any:
    from lanenb.snapshots import get_store

    opts = {k: v for k, v in (("namespace", args.namespace), ("context", args.context)) if v}
    return get_store(args.backend, **opts)


def _labels(items: list[str]) -> dict[str, str]:
    from lanenb.snapshots.base import SnapshotInputError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SnapshotInputError(f"--label {item!r}: must be KEY=VALUE")
        out[key] = value
    return out


def snapshot_job(snap: Snapshot, links: dict[tuple[str, str], dict[str, Any]]) -> str:
    link = links.get((snap.backend, snap.id))
    return link["job"] if link else snap.labels.get("job", "-")


def versions_table(snapshots: list[Snapshot], links: dict[tuple[str, str], dict[str, Any]] | None = None) -> Table:
    links = links if links is not None else registry_links()
    rows = [[s.id, s.name, snapshot_job(s, links), s.labels.get("role", "-"), s.labels.get("accuracy", "-"),
             s.created_text, fmt_size(s.size), s.volume, "ready" if s.ready else (s.error or "not ready")]
            for s in snapshots]
    return _VersionsTable(["id", "name", "job", "role", "accuracy", "date", "size", "volume", "state"], rows,
                          empty=EMPTY_HINT)


def registry_links() -> dict[tuple[str, str], dict[str, Any]]:
    from lanenb.registry.jobs import JobRegistry

    return {(link["store"], link["snapshot"]): link for link in JobRegistry().snapshot_links()}


def run_snap(args: argparse.Namespace, *, progress: bool = True) -> Any:
    """Do ``args.action``; returns a ``Table``, a ``SnapshotDiff`` or a string to print."""
    store = _store(args)
    if args.action == "list":
        snaps = store.list(args.volume, _labels(args.label))
        links = registry_links()
        if args.job:
            snaps = [s for s in snaps if snapshot_job(s, links) == args.job]
        return versions_table(snaps, links)
    if args.action == "show":
        snap = store.get(args.id)
        lines = [str(snap), f"labels: {', '.join(f'{k}={v}' for k, v in snap.labels.items()) or '-'}"]
        try:
            files = [f for f in store.files(snap.id) if f.type == "file"]
            lines.append(f"{len(files)} file(s):")
            lines += [f"  {f.path}  {fmt_size(f.size)}" for f in files[:50]]
            if len(files) > 50:
                lines.append(f"  ... and {len(files) - 50} more")
        except NotImplementedError:
            pass
        return "\n".join(lines)
    if args.action == "diff":
        return store.diff(args.a, args.b)
    if args.action == "restore":
        target = store.restore(args.id, args.target, progress=progress)
        return f"restored {args.id} into {target}"
    if args.action == "retrain":
        from lanenb.workflows.retrain import retrain

        overrides = {k: v for k, v in (("name", args.name), ("epochs", args.epochs), ("max_steps", args.max_steps),
                                       ("processes", args.processes)) if v is not None}
        job = retrain(args.id, args.to, backend=store, secrets=_secrets(args.secret), **overrides)
        return f"retraining from {args.id} on {args.to}: job {job.name} submitted"
    if args.action == "delete":
        store.delete(args.id)
        return f"deleted {args.id}"
    if args.action == "verify":
        result = store.verify(args.id)
        return f"{result.id}: {'ok' if result.ok else 'FAILED'}: {result.detail}"
    if args.action == "create":
        return f"created {store.create(args.volume, _labels(args.label), name=args.name, progress=progress)}"
    raise AssertionError(args.action)


def _secrets(items: list[str]) -> dict[str, str]:
    """``-e NAME=VALUE`` / ``-e NAME`` (from the environment) as ``{NAME: VALUE}``.

    Raises:
        SnapshotInputError: ``NAME`` alone that the environment does not hold.
    """
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            if name not in os.environ:
                raise SnapshotInputError(f"-e {name}: no variable {name!r} in this environment; export it first "
                                         f"or pass -e {name}=VALUE")
            value = os.environ[name]
        out[name] = value
    return out
