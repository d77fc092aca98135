"""Render a Vega-Lite spec (JSON on stdin) to PNG (stdout) in a process of its own.

Why a process: ``vl-convert`` runs Vega in an embedded JavaScript engine and holds the GIL for
the whole render (about 0.2 s a panel, 1-3 s for a run's grid, measured): in the kernel's
process that would freeze every cell for as long. Here the kernel only waits on a pipe.

    python -m lanenb.charts.vlpng --scale 1 < spec.json > chart.png
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="pixel ratio (2 for a sharp image on HiDPI screens)")
    args = ap.parse_args(argv)
    import vl_convert

    spec = json.loads(sys.stdin.buffer.read())
    try:
        png = vl_convert.vegalite_to_png(spec, scale=args.scale)
    except ValueError as exc:
        print(f"invalid Vega-Lite spec: {exc}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(bytes(png))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
