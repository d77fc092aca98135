"""Procedural road scenes in the real TuSimple layout, for demos, tests and benchmarks.

Each frame is a pinhole view of a flat road: 2-5 lane lines (solid or dashed, white or
yellow), straight or curved, a camera somewhere inside one lane with a little yaw, cars as
occluders, shadow bands, day or night lighting and sensor noise. Labels are computed from the
same geometry at the TuSimple rows (160..710 step 10, scaled to the image height), only below
a per-frame horizon cut-off and inside the image, and they continue through cars, as the
official labels do.

Frame ``i`` depends only on ``(seed, i)``: the same seed gives byte-identical files (fixed JPEG
quality, no timestamps), and a larger ``frames`` only appends frames. The last
``test_fraction`` of frames form ``test_label.json``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from lanenb_trainer.atomic import write_bytes

__all__ = ["synthesize", "render_frame", "synth_h_samples", "MARKER"]

MARKER = ".lanenb-synth.json"
TRAIN_FILE = "label_data_synth.json"
TEST_FILE = "test_label.json"
JPEG_QUALITY = 92
CAM_HEIGHT = 1.5  # metres
MIN_POINTS = 4  # labelled rows a line needs to count as a lane


def synth_h_samples(height: int) -> list[int]:
    """TuSimple's 160..710 step-10 rows scaled from 720 to ``height``."""
    return [int(round(y * height / 720.0)) for y in range(160, 711, 10)]


@dataclass
class _Line:
    x0: float  # lateral position at the camera (m, + right)
    dashed: bool
    colour: tuple[int, int, int]  # BGR
    width_m: float
    period: float
    dash: float
    phase: float


def _bgr(v: np.ndarray) -> tuple[int, int, int]:
    """Three drawn channel values as the ``(b, g, r)`` ints OpenCV's colour arguments take."""
    return int(v[0]), int(v[1]), int(v[2])


def _pt(*xy: float) -> tuple[int, ...]:
    """Coordinates rounded (half to even) to the int pixel point OpenCV's drawing calls take."""
    return tuple(int(v) for v in np.round(np.array(xy, np.float64)).astype(np.int32))


def _scene(rng: np.random.Generator, width: int, height: int) -> dict[str, Any]:
    n = int(rng.choice([2, 3, 4, 5], p=[0.15, 0.3, 0.4, 0.15]))
    lane_w = float(rng.uniform(3.3, 3.9))
    # The camera sits in a lane with at most two lines on each side (TuSimple's usual view):
    # SCNN has two slots per side, so a third line on one side could never be learnt.
    # Five lines put three on one side, which the >4-lane evaluation rule forgives.
    lo, hi = (1, 2) if n == 5 else (max(0, n - 3), min(1, n - 2))
    ego = int(rng.integers(lo, hi + 1))
    off = float(rng.uniform(-0.5, 0.5))
    lines = []
    for k in range(n):
        outer = k in (0, n - 1)
        dashed = bool(rng.random() < (0.25 if outer else 0.8))
        yellow = k == 0 and rng.random() < 0.3
        colour = (40, 200, 235) if yellow else _bgr(rng.integers(215, 250, 3))
        lines.append(_Line(
            x0=(k - ego - 0.5) * lane_w - off, dashed=dashed, colour=colour,
            width_m=float(rng.uniform(0.13, 0.2)), period=float(rng.uniform(7, 11)),
            dash=float(rng.uniform(2.5, 4)), phase=float(rng.uniform(0, 11)),
        ))
    curved = rng.random() < 0.5
    return {
        "lines": lines,
        "lane_w": lane_w,
        "f": width * float(rng.uniform(0.95, 1.15)),
        "cx": width / 2 + float(rng.uniform(-0.03, 0.03)) * width,
        "horizon": height * float(rng.uniform(0.36, 0.42)),
        "yaw": float(rng.uniform(-0.02, 0.02)),
        "curv": float(rng.uniform(-0.0025, 0.0025)) if curved else 0.0,
        "z_max": float(rng.uniform(60, 100)),
        "night": bool(rng.random() < 0.25),
        "cars": int(rng.choice([0, 1, 2, 3], p=[0.3, 0.35, 0.25, 0.1])),
        "shadows": int(rng.choice([0, 1, 2], p=[0.5, 0.35, 0.15])),
        "noise": float(rng.uniform(2, 6)),
        "blur": bool(rng.random() < 0.5),
    }


def _lateral(sc: dict[str, Any], x0: float, z: np.ndarray) -> np.ndarray:
    return x0 + sc["yaw"] * z + 0.5 * sc["curv"] * z * z


def _project_x(sc: dict[str, Any], x0: float, z: np.ndarray) -> np.ndarray:
    return sc["cx"] + sc["f"] * _lateral(sc, x0, z) / z


def _row_depth(sc: dict[str, Any], ys: np.ndarray) -> np.ndarray:
    return sc["f"] * CAM_HEIGHT / np.maximum(ys - sc["horizon"], 1e-3)


def _labels(sc: dict[str, Any], width: int, h_samples: list[int]) -> list[list[int]]:
    ys = np.asarray(h_samples, np.float64)
    z = _row_depth(sc, ys)
    visible = (ys > sc["horizon"]) & (z <= sc["z_max"])
    lanes = []
    for line in sc["lines"]:
        xs = _project_x(sc, line.x0, z)
        ok = visible & (xs >= 0) & (xs <= width - 1)
        lane = [int(round(x)) if o else -2 for x, o in zip(xs, ok)]
        if sum(ok) >= MIN_POINTS:  # a lane clipping a corner is noise, not a lane
            lanes.append(lane)
    return lanes


def render_frame(rng: np.random.Generator, width: int, height: int
                 ) -> tuple[np.ndarray, list[list[int]], list[int]]:
    """One BGR frame and its TuSimple lanes / h_samples."""
    hs = synth_h_samples(height)
    for _ in range(100):
        sc = _scene(rng, width, height)
        lanes = _labels(sc, width, hs)
        if len(lanes) >= 2:
            break
    else:  # pragma: no cover - geometry makes this practically impossible
        raise RuntimeError("could not draw a scene with two visible lanes")
    return _paint(rng, sc, width, height), lanes, hs


def _marking_polys(sc: dict[str, Any], line: _Line, z_near: float, z_far: float
                   ) -> list[np.ndarray]:
    """Image-space polygons of one marking: one for a solid line, one per visible dash."""
    if line.dashed:
        k0 = math.floor((z_near + line.phase) / line.period)
        spans = []
        for k in range(k0, k0 + int((z_far - z_near) / line.period) + 2):
            a = k * line.period - line.phase
            lo, hi = max(a, z_near), min(a + line.dash, z_far)
            if hi > lo:
                spans.append((lo, hi))
    else:
        spans = [(z_near, z_far)]
    polys = []
    for lo, hi in spans:
        # sample evenly in image rows (1/z), where the curve bends fastest on screen
        z = 1.0 / np.linspace(1.0 / lo, 1.0 / hi, max(4, int(24 * (1 / lo - 1 / hi) * z_near) + 4))
        xc = _project_x(sc, line.x0, z)
        hw = np.maximum(0.5 * sc["f"] * line.width_m / z, 0.7)
        y = sc["horizon"] + sc["f"] * CAM_HEIGHT / z
        pts = np.concatenate([np.stack([xc - hw, y], 1), np.stack([xc + hw, y], 1)[::-1]])
        polys.append(np.round(pts * 16).astype(np.int32))
    return polys


def _blend(base: np.ndarray, layer: np.ndarray, alpha_u8: np.ndarray) -> np.ndarray:
    w = alpha_u8.astype(np.float32) * np.float32(1 / 255)
    return cv2.blendLinear(base, layer, 1 - w, w)


def _paint(rng: np.random.Generator, sc: dict[str, Any], width: int, height: int) -> np.ndarray:
    hz = sc["horizon"]
    night = sc["night"]
    rows = np.arange(height, dtype=np.float32) + 0.5
    below = rows > hz
    # sky gradient, ground colour below the horizon
    top = np.array([70, 40, 30] if night else rng.uniform([190, 150, 110], [235, 200, 160]))
    low = np.array([90, 70, 60] if night else rng.uniform([220, 215, 205], [245, 240, 235]))
    ground = rng.uniform([60, 100, 80], [100, 150, 120]) * (0.5 if night else 1.0)
    t = np.clip(rows / max(hz, 1), 0, 1)[:, None]
    col = np.where(below[:, None], ground[None, :], top * (1 - t) + low * t).astype(np.float32)
    img: np.ndarray = np.repeat(col[:, None, :], width, axis=1)
    # road surface between the outer lines plus shoulders (slightly lighter far away)
    lines = sc["lines"]
    z_near = sc["f"] * CAM_HEIGHT / (height + 20 - hz)
    z_far = 400.0
    z = 1.0 / np.linspace(1.0 / z_near, 1.0 / z_far, 200)
    y = hz + sc["f"] * CAM_HEIGHT / z
    left = _project_x(sc, lines[0].x0 - 1.0, z)
    right = _project_x(sc, lines[-1].x0 + 1.0, z)
    road = np.zeros((height, width), np.uint8)
    poly = np.concatenate([np.stack([left, y], 1), np.stack([right, y], 1)[::-1]])
    cv2.fillPoly(road, [np.round(poly * 16).astype(np.int32)], 255, cv2.LINE_AA, 4)
    grey = float(rng.uniform(85, 125))
    zr = sc["f"] * CAM_HEIGHT / np.maximum(rows - hz, 1e-3)
    shade = (grey * (1.0 + 0.1 * np.clip(zr / 400.0, 0, 1))).astype(np.float32)
    layer = np.repeat((shade[:, None] * np.array([1.0, 1.0, 1.02], np.float32))[:, None, :], width, axis=1)
    img = _blend(img, layer, road)
    # lane markings (anti-aliased), drawn up to a little beyond the label cut-off
    paint = np.zeros((height, width, 3), np.uint8)
    alpha = np.zeros((height, width), np.uint8)
    for line in lines:
        polys = _marking_polys(sc, line, z_near, sc["z_max"] * 1.4)
        level = int(255 * rng.uniform(0.85, 1.0))
        cv2.fillPoly(paint, polys, line.colour, cv2.LINE_AA, 4)
        cv2.fillPoly(alpha, polys, level, cv2.LINE_AA, 4)
    img = _blend(img, paint.astype(np.float32), alpha)
    _shadows(rng, sc, img, width, height)
    _cars(rng, sc, img, width, height)
    if night:
        gain = float(rng.uniform(0.45, 0.65))
        bx = np.exp(-(((np.arange(width, dtype=np.float32) - width / 2) / (0.45 * width)) ** 2))
        by = np.exp(-(((height - rows) / (0.45 * height)) ** 2))
        img *= (gain + (1 - gain) * 0.8 * np.outer(by, bx))[..., None]
    else:
        img *= np.float32(rng.uniform(0.85, 1.1))
    cv2.setRNGSeed(int(rng.integers(0, 2**31 - 1)))  # OpenCV's RNG: same seed, same noise
    noise = np.empty_like(img)
    # OpenCV reads a bare float as the scalar (v, 0, 0, 0), so this noise has always gone into
    # the first (blue) channel only: spelled out as arrays, so a seed keeps giving the same bytes.
    cv2.randn(noise, np.zeros(3), np.array([sc["noise"], 0.0, 0.0]))
    img = cv2.add(img, noise)
    out: np.ndarray = np.clip(img, 0, 255, out=img).astype(np.uint8)
    if sc["blur"]:
        out = cv2.GaussianBlur(out, (3, 3), 0)
    return out


def _shadows(rng: np.random.Generator, sc: dict[str, Any], img: np.ndarray, width: int, height: int) -> None:
    hz = sc["horizon"]
    for _ in range(sc["shadows"]):
        y0 = float(rng.uniform(hz + 0.1 * (height - hz), height - 20))
        y1 = min(height, y0 + float(rng.uniform(0.05, 0.25)) * (height - hz))
        x0 = float(rng.uniform(-0.2, 0.6)) * width
        x1 = x0 + float(rng.uniform(0.3, 0.9)) * width
        skew = float(rng.uniform(-0.3, 0.3)) * width
        poly = np.array([[x0, y0], [x1, y0], [x1 + skew, y1], [x0 + skew, y1]], np.int32)
        m: np.ndarray = np.zeros((height, width), np.float32)
        cv2.fillPoly(m, [poly], 1.0)
        m = cv2.GaussianBlur(m, (0, 0), 6)
        img *= (1 - float(rng.uniform(0.3, 0.5)) * m)[..., None]


def _cars(rng: np.random.Generator, sc: dict[str, Any], img: np.ndarray, width: int, height: int) -> None:
    lines = sc["lines"]
    cars = []
    for _ in range(sc["cars"]):
        k = int(rng.integers(0, len(lines) - 1))
        zc = float(rng.uniform(12, 70))
        xc = 0.5 * (lines[k].x0 + lines[k + 1].x0) + float(rng.uniform(-0.4, 0.4))
        cars.append((zc, xc))
    for zc, xc in sorted(cars, reverse=True):  # far ones first
        f = sc["f"]
        u = float(_project_x(sc, xc, np.array([zc]))[0])
        v = sc["horizon"] + f * CAM_HEIGHT / zc
        w = f * float(rng.uniform(1.7, 2.0)) / zc
        h = f * float(rng.uniform(1.3, 1.7)) / zc
        x0, x1, y0, y1 = u - w / 2, u + w / 2, v - h, v
        body = rng.uniform(30, 170, 3) * [1.0, 0.9, 1.1]
        if sc["night"]:
            body *= 0.5
        cv2.ellipse(img, _pt(u, v), _pt(w * 0.6, h * 0.08), 0, 0, 360, (25, 25, 25), -1)
        cv2.rectangle(img, _pt(x0, y0), _pt(x1, y1 - h * 0.12), body.tolist(), -1)
        cv2.rectangle(img, _pt(x0 + w * 0.12, y0 + h * 0.08), _pt(x1 - w * 0.12, y0 + h * 0.42),
                      (body * 0.35 + 20).tolist(), -1)
        light = (40, 40, 255) if sc["night"] else (30, 30, 170)
        for lx in (x0 + w * 0.04, x1 - w * 0.16):
            cv2.rectangle(img, _pt(lx, y0 + h * 0.5), _pt(lx + w * 0.12, y0 + h * 0.62), light, -1)
        for wx in (x0 + w * 0.05, x1 - w * 0.22):
            cv2.rectangle(img, _pt(wx, y1 - h * 0.14), _pt(wx + w * 0.17, y1), (15, 15, 15), -1)


def _prepare_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise FileExistsError(
                f"refusing to write into {out}: it is not empty and not a previous "
                f"`lanenb data synth` output (no {MARKER}); choose an empty or new directory")
        shutil.rmtree(out / "clips" / "synth", ignore_errors=True)  # our own previous frames
        for name in (TRAIN_FILE, TEST_FILE):
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


def synthesize(out_dir: str | os.PathLike, frames: int, *, seed: int = 0, width: int = 1280,
               height: int = 720, test_fraction: float = 0.2, progress: bool = True) -> dict:
    """Write ``frames`` synthetic frames under ``out_dir`` in the TuSimple layout.

    Returns a summary dict (paths, counts, parameters). Raises ``FileExistsError`` for a
    non-empty directory that is not a previous synth output, ``ValueError`` for bad sizes.
    """
    if not isinstance(frames, int) or frames < 1:
        raise ValueError(f"frames must be a positive integer; got {frames!r}")
    if width < 128 or height < 128:
        raise ValueError(f"width and height must be >= 128 pixels; got {width}x{height}")
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1); got {test_fraction}")
    n_test = int(round(frames * test_fraction))
    if test_fraction > 0 and frames >= 2:
        n_test = min(max(n_test, 1), frames - 1)
    n_train = frames - n_test
    out = Path(out_dir)
    _prepare_out_dir(out)
    write_bytes(out / MARKER, json.dumps(
        {"generator": "lanenb data synth", "seed": seed, "frames": frames, "width": width,
         "height": height, "test_fraction": test_fraction}, sort_keys=True).encode() + b"\n")

    from lanenb_trainer.progress import progress_bar

    train_lines: list[str] = []
    test_lines: list[str] = []
    for i in progress_bar(range(frames), desc="synth frames", unit="frame", disable=not progress):
        img, lanes, hs = render_frame(np.random.default_rng([int(seed), i]), width, height)
        raw = f"clips/synth/{i:06d}/20.jpg"
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:  # pragma: no cover
            raise RuntimeError(f"JPEG encoding failed for frame {i}")
        write_bytes(out / raw, buf.tobytes())
        line = json.dumps({"lanes": lanes, "h_samples": hs, "raw_file": raw})
        (train_lines if i < n_train else test_lines).append(line)
    write_bytes(out / TRAIN_FILE, ("\n".join(train_lines) + "\n").encode())
    if test_lines:
        write_bytes(out / TEST_FILE, ("\n".join(test_lines) + "\n").encode())
    return {
        "out_dir": str(out),
        "frames": frames,
        "train": n_train,
        "test": len(test_lines),
        "label_files": [str(out / TRAIN_FILE)] + ([str(out / TEST_FILE)] if test_lines else []),
        "seed": seed,
        "width": width,
        "height": height,
    }

