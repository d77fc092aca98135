"""Render a Vega-Lite spec (JSON on stdin) to PNG (stdout) in a process of its own.

Why a process: ``vl-convert`` runs Vega in an embedded JavaScript engine and holds the GIL for
the whole render (about 0.2 s a panel, 1-3 s for a run's grid, measured): in the kernel's
process that would freeze every cell for as long. Here the kernel only waits on a pipe.

    python -m lanenb.charts.vlpng --scale 1 --colours 64 < spec.json > chart.png

The image is reduced to a palette of ``--colours`` colours (Pillow, no dithering): charts have
few colours, and a saved notebook then keeps about 20 kB instead of 230 kB for a run's grid
(measured by bench/notebook_view.py; matplotlib's four panels were 61 kB).
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="pixel ratio (2 for a sharp image on HiDPI screens)")
    ap.add_argument("--colours", type=int, default=64, help="palette size (0: keep full colour)")
    args = ap.parse_args(argv)
    import vl_convert

    spec = json.loads(sys.stdin.buffer.read())
    try:
        png = vl_convert.vegalite_to_png(spec, scale=args.scale)
    except ValueError as exc:
        print(f"invalid Vega-Lite spec: {exc}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(_palette(bytes(png), args.colours) if args.colours else bytes(png))
    return 0


def _palette(png: bytes, colours: int) -> bytes:
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    reduced = image.quantize(colors=colours, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    reduced.save(out, "PNG", optimize=True)
    return out.getvalue()


if __name__ == "__main__":
    raise SystemExit(main())
