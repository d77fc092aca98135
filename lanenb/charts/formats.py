"""One formatting vocabulary for every face: durations, sizes, the missing-value mark, relative
dates, names cut to fit and the state words (which states a Stop, Suspend or Resume applies to).

Before this module a duration read "1m15s" in the console, "1m 15s" in the sidebar and "1m" in
the team estimates; sizes were MiB in the CLI and MB in the sidebar; a missing value was a hyphen
in Python and an en dash in TypeScript. Each rule is now a table here, used by the Python faces through
the functions below, and the extension's ``extension/src/formats.ts`` is generated from the same
tables (``python -m lanenb.charts.formats > extension/src/formats.ts``; a test checks it is
current), so the sidebar writes what the notebook and the console write:

- durations: the largest unit and the next one, ``45s``, ``1m 15s``, ``1h 30m``, ``2d 3h``;
- sizes: binary units (``KiB``, ``MiB``, ``GiB``: what ``free``, ``nvidia-smi`` and the ``rss``
  and ``gpu_mem`` events count in), one decimal under 10, ``812 B``, ``4.2 MiB``, ``172 MiB``;
- the missing mark, an en dash (U+2013; a hyphen beside numbers reads as a minus sign), for a
  value not known (yet);
- relative dates: ``just now``, ``5 min ago``, ``3 h ago``, ``2 days ago``;
- a long name cut in the middle (``lane-2026…-trial-3``): its start and its distinctive end.

A new unit or threshold is one line here, then regenerate ``formats.ts``.
"""

from __future__ import annotations

import decimal
import json
import math
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["MISSING", "ELLIPSIS", "DURATION_UNITS", "SIZE_BASE", "SIZE_UNITS", "SIZE_DECIMALS_BELOW",
           "RELATIVE_STEPS", "NAME_TAIL", "LIVE", "STOPPABLE", "SUSPENDABLE", "RESUMABLE", "format_duration",
           "format_bytes", "format_mib", "format_percent", "relative_time", "name_tail", "middle_cut", "typescript"]

MISSING = "\u2013"  # an en dash: a value not known (yet), in every table and label
ELLIPSIS = "\u2026"  # "…": where a cut name lost its middle

# (unit, seconds), largest first: a duration shows its largest unit and the next one
DURATION_UNITS: tuple[tuple[str, int], ...] = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))

# sizes: binary units, as the events (rss_mb, gpu_mem_mb are MiB), free and nvidia-smi count
SIZE_BASE = 1024
SIZE_UNITS: tuple[str, ...] = ("B", "KiB", "MiB", "GiB", "TiB")
SIZE_DECIMALS_BELOW = 10  # one decimal under 10 of a unit ("4.2 MiB"), none from 10 on ("172 MiB")

# relative dates: (below this many seconds, the words; {n} the count in the unit, unit in seconds)
RELATIVE_STEPS: tuple[tuple[float, str, int], ...] = (
    (45, "just now", 1), (3600, "{n} min ago", 60), (86400, "{n} h ago", 3600), (math.inf, "{n} day{s} ago", 86400))

# a long name keeps its end: at most this many characters, from a hyphen among them if any
NAME_TAIL = 12

# the state words: which job states each control applies to (lanenb.contract.status.JobState)
LIVE: tuple[str, ...] = ("pending", "running", "restarting")  # under way: its numbers change
STOPPABLE: tuple[str, ...] = ("pending", "running", "restarting", "suspended")
SUSPENDABLE: tuple[str, ...] = ("pending", "running", "restarting")
RESUMABLE: tuple[str, ...] = ("suspended", "preempted")


def _known(value: float | None) -> bool:
    return value is not None and not isinstance(value, bool) and math.isfinite(value)


def _round(value: float) -> int:
    """Halves up, as JavaScript's ``Math.round`` (Python's ``round`` goes to the even one)."""
    return math.floor(value + 0.5)


def _fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, halves up, as JavaScript's ``toFixed`` writes it."""
    exact = decimal.Decimal(value)  # the float's exact value, rounded once: what toFixed does
    return str(exact.quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP))


def format_value(value: Any, digits: str = ".4g") -> str:
    """A table cell: ``MISSING`` for None, a float with ``digits`` (a format spec: ``.4g`` for
    a parameter or a score, ``.0f`` for a percentage or MiB), anything else as ``str``."""
    if value is None:
        return MISSING
    if isinstance(value, float):
        return format(value, digits)
    return str(value)


def format_duration(seconds: float | None) -> str:
    """``45`` -> ``45s``, ``75`` -> ``1m 15s``, ``5400`` -> ``1h 30m``, ``183600`` -> ``2d 3h``;
    negative reads as 0, unknown (None, NaN) as ``MISSING``."""
    if not _known(seconds):
        return MISSING
    s = max(0, _round(seconds))  # type: ignore[arg-type]
    for i, (unit, size) in enumerate(DURATION_UNITS):
        if s >= size or size == 1:
            if i == len(DURATION_UNITS) - 1:
                return f"{s}{unit}"
            small, small_size = DURATION_UNITS[i + 1]
            return f"{s // size}{unit} {(s % size) // small_size}{small}"
    return f"{s}s"  # pragma: no cover (the table ends in seconds)


def format_bytes(size: float | None) -> str:
    """``812`` -> ``812 B``, ``4404019`` -> ``4.2 MiB``, ``180355072`` -> ``172 MiB``; unknown
    (None, NaN) as ``MISSING``."""
    if not _known(size):
        return MISSING
    value = float(size)  # type: ignore[arg-type]
    i = 0
    while abs(value) >= SIZE_BASE and i < len(SIZE_UNITS) - 1:
        value /= SIZE_BASE
        i += 1
    if i == 0:
        return f"{_fixed(value, 0)} {SIZE_UNITS[0]}"
    return f"{_fixed(value, 1 if abs(value) < SIZE_DECIMALS_BELOW else 0)} {SIZE_UNITS[i]}"


def format_mib(mib: float | None) -> str:
    """A size the events give in MiB (``rss_mb``, ``gpu_mem_mb``), as ``format_bytes`` writes it."""
    return MISSING if not _known(mib) else format_bytes(mib * SIZE_BASE * SIZE_BASE)  # type: ignore[operator]


def format_percent(share: float | None) -> str:
    """A share of 1 as a whole percentage (``0.456`` -> ``46%``), unknown as ``MISSING``."""
    return MISSING if not _known(share) else f"{_round(share * 100)}%"  # type: ignore[operator]


def relative_time(epoch_seconds: float, now: float) -> str:
    """Seconds since the epoch as ``just now``, ``5 min ago``, ``3 h ago``, ``2 days ago``."""
    d = max(0.0, now - epoch_seconds)
    for below, words, unit in RELATIVE_STEPS:
        if d < below:
            n = _round(d / unit)
            return words.format(n=n, s="" if n == 1 else "s")
    return MISSING  # pragma: no cover (the last step has no bound)


def name_tail(name: str) -> str:
    """The end of ``name`` a cut keeps whole: its last ``NAME_TAIL`` characters, from the first
    hyphen among them (``lane-20261128-101500-trial-3`` -> ``-trial-3``); empty for a short name."""
    if len(name) <= NAME_TAIL:
        return ""
    tail = name[-NAME_TAIL:]
    hyphen = tail.find("-")
    return tail[hyphen:] if hyphen > 0 else tail


def middle_cut(name: str, limit: int) -> str:
    """``name`` in at most ``limit`` characters, its middle replaced by ``…``: the start says
    what it is, the end (``name_tail``, at most half) tells siblings apart
    (``lane-202611…-trial-3``), where an ellipsis at the end would make three sweep trials
    look the same. For text faces (tables); the sidebar cuts at the width it has."""
    if len(name) <= limit or limit < 3:
        return name
    tail = name_tail(name)
    if len(tail) > (limit - 1) // 2:  # a tail of at most half: the start still says what it is
        tail = name[len(name) - (limit - 1) // 2:]
    head = limit - 1 - len(tail)
    return name[:head] + ELLIPSIS + tail


# ------------------------------------------------------------------ TypeScript

def _ts_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


_TS_FUNCTIONS = r"""
function known(value: number | null | undefined): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** 45 -> "45s", 75 -> "1m 15s", 5400 -> "1h 30m", 183600 -> "2d 3h"; unknown -> MISSING. */
export function formatDuration(seconds: number | null | undefined): string {
  if (!known(seconds)) {
    return MISSING;
  }
  const s = Math.max(0, Math.round(seconds));
  for (let i = 0; i < DURATION_UNITS.length; i++) {
    const [unit, size] = DURATION_UNITS[i];
    if (s >= size || size === 1) {
      if (i === DURATION_UNITS.length - 1) {
        return `${s}${unit}`;
      }
      const [small, smallSize] = DURATION_UNITS[i + 1];
      return `${Math.floor(s / size)}${unit} ${Math.floor((s % size) / smallSize)}${small}`;
    }
  }
  return `${s}s`;
}

/** 812 -> "812 B", 4404019 -> "4.2 MiB" (binary units); unknown -> MISSING. */
export function formatBytes(size: number | null | undefined): string {
  if (!known(size)) {
    return MISSING;
  }
  let value = size;
  let i = 0;
  while (Math.abs(value) >= SIZE_BASE && i < SIZE_UNITS.length - 1) {
    value /= SIZE_BASE;
    i++;
  }
  if (i === 0) {
    return `${value.toFixed(0)} ${SIZE_UNITS[0]}`;
  }
  return `${value.toFixed(Math.abs(value) < SIZE_DECIMALS_BELOW ? 1 : 0)} ${SIZE_UNITS[i]}`;
}

/** A size the events give in MiB (rss_mb, gpu_mem_mb), as formatBytes writes it. */
export function formatMiB(mib: number | null | undefined): string {
  return known(mib) ? formatBytes(mib * SIZE_BASE * SIZE_BASE) : MISSING;
}

/** A share of 1 as a whole percentage (0.456 -> "46%"); unknown -> MISSING. */
export function formatPercent(share: number | null | undefined): string {
  return known(share) ? `${Math.round(share * 100)}%` : MISSING;
}

/** Seconds since the epoch as "just now", "5 min ago", "3 h ago", "2 days ago". */
export function relativeTime(epochSeconds: number, now: number = Date.now() / 1000): string {
  const d = Math.max(0, now - epochSeconds);
  for (const [below, words, unit] of RELATIVE_STEPS) {
    if (below === null || d < below) {
      const n = Math.round(d / unit);
      return words.replace('{n}', String(n)).replace('{s}', n === 1 ? '' : 's');
    }
  }
  return MISSING;
}

/** The end of `name` a cut keeps whole: its last NAME_TAIL characters, from the first hyphen
 *  among them ("lane-20261128-101500-trial-3" -> "-trial-3"); empty for a short name. */
export function nameTail(name: string): string {
  if (name.length <= NAME_TAIL) {
    return '';
  }
  const tail = name.slice(name.length - NAME_TAIL);
  const hyphen = tail.indexOf('-');
  return hyphen > 0 ? tail.slice(hyphen) : tail;
}

/** `name` in at most `limit` characters, its middle replaced by ELLIPSIS ("lane-202611…-trial-3"):
 *  the start says what it is, the end (nameTail, at most half) tells siblings apart. */
export function middleCut(name: string, limit: number): string {
  if (name.length <= limit || limit < 3) {
    return name;
  }
  let tail = nameTail(name);
  if (tail.length > Math.floor((limit - 1) / 2)) {
    tail = name.slice(name.length - Math.floor((limit - 1) / 2));
  }
  const head = limit - 1 - tail.length;
  return name.slice(0, head) + ELLIPSIS + tail;
}
"""


def typescript() -> str:
    """``extension/src/formats.ts``: the tables above and the rules that read them."""
    relative = ", ".join(
        f"[{'null' if math.isinf(below) else json.dumps(below)}, {json.dumps(words)}, {unit}]"
        for below, words, unit in RELATIVE_STEPS)
    out = [
        "// generated by `python -m lanenb.charts.formats`: edit lanenb/charts/formats.py",
        "// One formatting vocabulary for every face (the module's docstring says why).",
        "",
        f"export const MISSING = {json.dumps(MISSING)};",
        f"export const ELLIPSIS = {json.dumps(ELLIPSIS)};",
        "export const DURATION_UNITS: ReadonlyArray<readonly [string, number]> = ["
        + ", ".join(f"[{json.dumps(u)}, {s}]" for u, s in DURATION_UNITS) + "];",
        f"export const SIZE_BASE = {SIZE_BASE};",
        f"export const SIZE_UNITS: readonly string[] = {_ts_list(SIZE_UNITS)};",
        f"export const SIZE_DECIMALS_BELOW = {SIZE_DECIMALS_BELOW};",
        f"export const NAME_TAIL = {NAME_TAIL};",
        "// (below this many seconds or null: no bound, the words, the unit in seconds)",
        f"export const RELATIVE_STEPS: ReadonlyArray<readonly [number | null, string, number]> = [{relative}];",
        "// the job states each control applies to",
        f"export const LIVE: ReadonlySet<string> = new Set({_ts_list(LIVE)});",
        f"export const STOPPABLE: ReadonlySet<string> = new Set({_ts_list(STOPPABLE)});",
        f"export const SUSPENDABLE: ReadonlySet<string> = new Set({_ts_list(SUSPENDABLE)});",
        f"export const RESUMABLE: ReadonlySet<string> = new Set({_ts_list(RESUMABLE)});",
    ]
    return "\n".join(out) + "\n" + _TS_FUNCTIONS


if __name__ == "__main__":
    sys.stdout.write(typescript())
