"""``lanenb data fetch|check|synth|preview``: get, validate, generate and look at datasets."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="check, synthesise or preview TuSimple datasets")
    sub = data.add_subparsers(dest="data_command", required=True, metavar="SUBCOMMAND")

    from lanenb_trainer.datasets.fetch import add_fetch_arguments

    fetch = sub.add_parser("fetch", help="download + verify + safely extract TuSimple (or CULane) into --to",
                           description="Download the official archives (resuming partial downloads), verify "
                                       "size/sha256, extract refusing paths that escape --to, run data check, "
                                       "and move the result into place. A complete --to is left alone.")
    add_fetch_arguments(fetch, to_required=False)
    add_cluster_fetch_arguments(fetch)
    fetch.set_defaults(func=cmd_fetch)

    check = sub.add_parser("check", help="validate labels and images; one FILE:LINE line per problem")
    check.add_argument("dir", help="dataset root (clips/ + label JSON-lines files)")
    check.add_argument("--quiet", action="store_true", help="no progress bar")
    check.set_defaults(func=cmd_check)

    synth = sub.add_parser("synth", help="write synthetic road scenes in the TuSimple layout")
    synth.add_argument("--out", required=True, help="output directory (new, empty, or a previous synth)")
    synth.add_argument("--frames", type=int, default=200, help="number of frames (default 200)")
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--width", type=int, default=1280)
    synth.add_argument("--height", type=int, default=720)
    synth.add_argument("--test-fraction", type=float, default=0.2,
                       help="share of frames written to test_label.json (default 0.2)")
    synth.add_argument("--quiet", action="store_true", help="no progress bar")
    synth.set_defaults(func=cmd_synth)

    preview = sub.add_parser("preview", help="PNG grid of frames with ground-truth lanes")
    preview.add_argument("dir", help="dataset root")
    preview.add_argument("--out", required=True, help="PNG file to write")
    preview.add_argument("--n", type=int, default=8, help="number of frames (default 8)")
    preview.add_argument("--split", default="train", choices=("train", "val", "test"))
    preview.add_argument("--seed", type=int, default=0, help="which frames to pick")
    preview.add_argument("--pred", help="TuSimple predictions JSON lines (e.g. RUN/predictions/test.json): "
                         "draw them in colour over thin white ground truth")
    preview.set_defaults(func=cmd_preview)


def add_cluster_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "cluster", "with --cluster the fetch runs as a Kubernetes Job that fills a PVC (a lanenb job: "
                   "lanenb jobs logs/wait/cancel NAME); the data lands in <mount-path>/<dataset> on the PVC")
    g.add_argument("--cluster", action="store_true", help="fetch into a PVC with a Kubernetes Job instead of --to")
    g.add_argument("--pvc", help="the PVC to fill (created unless it exists)")
    g.add_argument("--size", default="100Gi", help="size of a PVC to create (default 100Gi)")
    g.add_argument("--storage-class", help="storage class of a PVC to create (default: the cluster's default)")
    g.add_argument("--image", default=os.environ.get("LANENB_IMAGE"),
                   help="the trainer image that runs the fetcher (default: $LANENB_IMAGE)")
    g.add_argument("--namespace", help="default: the kubeconfig context's namespace")
    g.add_argument("--context", help="kubeconfig context (default: the current one)")
    g.add_argument("--mount-path", default="/mnt", help="where the pod mounts the PVC (default /mnt)")
    g.add_argument("--name", help="job name (default fetch-<dataset>-<pvc>-<4 hex>)")
    g.add_argument("--openshift", dest="openshift", action="store_true", default=None,
                   help="a pod for OpenShift's restricted SCC / Pod Security restricted (non-root; default: "
                        "when the cluster serves security.openshift.io)")
    g.add_argument("--no-openshift", dest="openshift", action="store_false", default=None, help=argparse.SUPPRESS)
    mode = g.add_mutually_exclusive_group()
    mode.add_argument("--wait", action="store_true", help="wait quietly for the end instead of following the log")
    mode.add_argument("--detach", action="store_true", help="submit and return (lanenb jobs logs -f NAME follows it)")


def cmd_fetch(args: argparse.Namespace) -> int:
    from lanenb_trainer.datasets.fetch import run_and_report

    if args.cluster:
        return cmd_fetch_cluster(args)
    given = [f"--{k.replace('_', '-')}" for k in ("pvc", "storage_class", "namespace", "context", "name")
             if getattr(args, k)] + [f for f, on in (("--wait", args.wait), ("--detach", args.detach)) if on] \
        + ([] if args.openshift is None else ["--openshift" if args.openshift else "--no-openshift"])
    if given or not args.to:
        why = f"{', '.join(given)} need(s) --cluster" if given else "--to DIR is required (or --cluster --pvc NAME)"
        print(f"lanenb data fetch: error: {why}", file=sys.stderr)
        return 2
    return run_and_report(args, "lanenb data fetch: error")


def cmd_fetch_cluster(args: argparse.Namespace) -> int:
    """Submit the fetch Job (a lanenb job), then follow its log, wait, or return (--detach)."""
    from lanenb.errors import UserError
    from lanenb_trainer.datasets.fetch import parse_url_args

    prog = "lanenb data fetch"
    if args.to:
        print(f"{prog}: error: --to is a local directory; with --cluster the data goes to "
              f"{args.mount_path.rstrip('/')}/{args.dataset} on the PVC (see --mount-path)", file=sys.stderr)
        return 2
    if not args.pvc:
        print(f"{prog}: error: --cluster needs --pvc NAME (the claim to fill)", file=sys.stderr)
        return 2
    fields = {"size": args.size, "storage_class": args.storage_class, "namespace": args.namespace,
              "context": args.context, "mount_path": args.mount_path, "name": args.name,
              "parts": args.parts or [], "mirrors": args.mirror, "urls": args.url,
              "default_urls": not args.no_default_urls, "openshift": args.openshift}
    if args.progress_every is not None:
        fields["progress_every"] = args.progress_every
    try:
        parse_url_args(args.url, args.dataset)  # a bad --url fails here, not in the pod
        from lanenb.datasets.cluster import submit_fetch_job

        job = submit_fetch_job(args.dataset, pvc=args.pvc, image=args.image or "", **fields)
    except UserError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    where = job.handle.get("dataset_path")
    print(f"submitted {job.name}: {args.dataset} into PVC {args.pvc} (namespace {job.handle.get('namespace')}) at "
          f"{where}", flush=True)
    if args.detach:
        print(f"follow it: lanenb jobs logs -f {job.name}    stop it: lanenb jobs cancel {job.name}")
        return 0
    try:
        if args.wait:
            status = job.wait()
        else:  # the pod's log as it comes (progress lines, then the result or the fetcher's error)
            for update in job.updates():
                if update.line is not None:
                    print(update.line.text, flush=True)
            status = job.status()
    except KeyboardInterrupt:
        print(f"detached: {job.name} keeps running (lanenb jobs cancel {job.name} stops it)", file=sys.stderr)
        return 130
    print(f"{job.name}: {status}", flush=True)
    code = 0 if status.state.value == "succeeded" else 1
    if code == 0:
        print(f"train on it: --pvc {args.pvc}:{args.mount_path} --dataset {where}", flush=True)
    return code


def cmd_check(args: argparse.Namespace) -> int:
    from lanenb_trainer.data.check import check_dataset
    from lanenb_trainer.data.culane import check_culane, is_culane_root

    check = check_culane if is_culane_root(args.dir) else check_dataset  # CULane: list/*.txt + .lines.txt
    problems = check(args.dir, progress=not args.quiet and sys.stderr.isatty())
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in {args.dir}", file=sys.stderr)
        return 1
    print(f"{args.dir}: OK", file=sys.stderr)
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    from lanenb_trainer.data.synth import synthesize

    try:
        summary = synthesize(args.out, args.frames, seed=args.seed, width=args.width,
                             height=args.height, test_fraction=args.test_fraction,
                             progress=not args.quiet)
    except (ValueError, FileExistsError, NotADirectoryError) as exc:
        print(f"lanenb data synth: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


def cmd_preview(args: argparse.Namespace) -> int:

    from lanenb_trainer.data.labels import LabelError
    from lanenb_trainer.data.preview import preview_grid, write_png
    from lanenb_trainer.evaluation.jsonl import read_prediction_lanes

    out = Path(args.out)
    if out.suffix.lower() != ".png":
        print(f"lanenb data preview: error: --out must end in .png; got {args.out}", file=sys.stderr)
        return 2
    try:
        predictions = read_prediction_lanes(args.pred) if args.pred else None
        grid = preview_grid(args.dir, n=args.n, split=args.split, seed=args.seed,
                            predictions=predictions)
    except (LabelError, ValueError, FileNotFoundError) as exc:
        print(f"lanenb data preview: error: {exc}", file=sys.stderr)
        return 2
    write_png(out, grid)
    print(f"wrote {out} ({grid.shape[1]}x{grid.shape[0]})", file=sys.stderr)
    return 0

