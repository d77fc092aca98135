"""One formatting vocabulary (``lanenb.charts.formats``): durations, sizes in binary units, the
missing mark, relative dates and names cut in the middle are written once in Python; the
extension's ``extension/src/formats.ts`` is generated from the same tables, and its functions
write exactly what the Python ones write (checked by running the generated TypeScript in Node).
Also the charts' rules from issue 42: zoom only with Ctrl/Cmd + wheel, whole-second time ticks."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lanenb.charts import formats, specs
from lanenb.charts.formats import MISSING

ROOT = Path(__file__).parents[2]
EXTENSION = ROOT / "extension"

DURATIONS = [(0, "0s"), (1, "1s"), (44.5, "45s"), (59.4, "59s"), (59.6, "1m 0s"), (75, "1m 15s"),
             (480, "8m 0s"), (3599, "59m 59s"), (3600, "1h 0m"), (5400, "1h 30m"), (86399, "23h 59m"),
             (86400, "1d 0h"), (183600, "2d 3h"), (-5, "0s"), (None, MISSING), (math.nan, MISSING), (math.inf, MISSING)]
SIZES = [(0, "0 B"), (812, "812 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (4404019, "4.2 MiB"),
         (1310720, "1.3 MiB"), (180355072, "172 MiB"), (10 * 2**20 - 1, "10.0 MiB"), (3 * 2**30, "3.0 GiB"),
         (5 * 2**40, "5.0 TiB"), (None, MISSING), (math.nan, MISSING)]
NAMES = [("lane-sweep-20261128-101500-trial-3", 20, "lane-sweep-…-trial-3"), ("short", 20, "short"),
         ("abcdefghijklmnopqrstuvwxyz", 11, "abcde…vwxyz"), ("lane-20261128-101500", 12, "lane-2…01500")]


@pytest.mark.parametrize(("seconds", "text"), DURATIONS)
def test_a_duration_reads_in_its_largest_unit_and_the_next(seconds, text):
    assert formats.format_duration(seconds) == text


@pytest.mark.parametrize(("size", "text"), SIZES)
def test_a_size_reads_in_binary_units(size, text):
    assert formats.format_bytes(size) == text


def test_sizes_given_in_mib_and_shares_read_the_same_way():
    assert formats.format_mib(172) == "172 MiB"
    assert formats.format_mib(0.5) == "512 KiB"
    assert formats.format_mib(None) == formats.MISSING
    assert (formats.format_percent(0.456), formats.format_percent(0.005), formats.format_percent(None)) == \
        ("46%", "1%", MISSING)


def test_relative_dates_count_in_words():
    now = 1_000_000.0
    assert [formats.relative_time(now - d, now) for d in (10, 300, 3 * 3600, 86400, 5 * 86400, -30)] == \
        ["just now", "5 min ago", "3 h ago", "1 day ago", "5 days ago", "just now"]


@pytest.mark.parametrize(("name", "limit", "text"), NAMES)
def test_a_long_name_loses_its_middle_and_keeps_its_distinctive_end(name, limit, text):
    assert formats.middle_cut(name, limit) == text
    assert len(formats.middle_cut(name, limit)) <= max(limit, len(name) if len(name) <= limit else 0)


def test_the_name_tail_starts_at_a_hyphen_among_the_last_characters():
    assert formats.name_tail("lane-sweep-20261128-101500-trial-3") == "-trial-3"
    assert formats.name_tail("lane") == ""
    assert formats.name_tail("abcdefghijklmnopqrstuvwxyz") == "opqrstuvwxyz"


def test_the_state_words_match_the_job_states_and_the_jobs_layer():
    from lanenb.contract.status import JobState
    from lanenb.jobs import job as job_module

    states = {s.value for s in JobState}
    assert set(formats.STOPPABLE) <= states and set(formats.SUSPENDABLE) <= states
    assert set(formats.RESUMABLE) <= states and set(formats.LIVE) <= states
    # the sets Job.suspend and Job.resume check (public or not, whichever the jobs layer names)
    suspendable = getattr(job_module, "SUSPENDABLE", None) or job_module.SUSPENDABLE
    resumable = getattr(job_module, "RESUMABLE", None) or job_module.RESUMABLE
    assert {s.value for s in suspendable} == set(formats.SUSPENDABLE)
    assert {s.value for s in resumable} == set(formats.RESUMABLE)


def test_the_extensions_formats_are_generated_from_the_vocabulary():
    ts = (EXTENSION / "src" / "formats.ts").read_text()
    assert ts == formats.typescript(), "run: python -m lanenb.charts.formats > extension/src/formats.ts"


def test_the_extension_keeps_no_formatting_rules_of_its_own():
    """Units, thresholds and the missing mark come from formats.ts; no other file spells them."""
    for path in sorted((EXTENSION / "src").glob("*.ts")):
        if path.name == "formats.ts":
            continue
        text = path.read_text()
        assert f"'{MISSING}'" not in text and f'"{MISSING}"' not in text, f"{path.name}: use MISSING from formats.ts"
        assert not re.search(r"'(kB|MB|GB|KiB|MiB|GiB)'", text), f"{path.name}: sizes are formats.ts's formatBytes"
        assert not re.search(r"function (formatDuration|formatBytes|relativeTime)\b", text), path.name
        assert not re.search(r"new Set\(\['(pending|suspended)'", text), f"{path.name}: state words are formats.ts's"


@pytest.mark.skipif(shutil.which("node") is None or not (EXTENSION / "node_modules" / "typescript").is_dir(),
                    reason="Node.js or extension/node_modules is missing (scripts/setup.sh)")
def test_the_typescript_formats_write_what_the_python_ones_write(tmp_path):
    cases = {
        "formatDuration": [[s] for s, _ in DURATIONS if s is not None and math.isfinite(s)],
        "formatBytes": [[s] for s, _ in SIZES if s is not None and math.isfinite(s)] + [[1.25 * 2**20], [2**53]],
        "formatMiB": [[172], [0.5], [1536]],
        "formatPercent": [[0.456], [0.005], [1]],
        "relativeTime": [[1_000_000.0 - d, 1_000_000.0] for d in (10, 44.9, 45, 300, 10_000, 86400, 500_000)],
        "middleCut": [[n, lim] for n, lim, _ in NAMES],
        "nameTail": [["lane-sweep-20261128-101500-trial-3"], ["lane"], ["abcdefghijklmnopqrstuvwxyz"]],
    }
    python = {"formatDuration": formats.format_duration, "formatBytes": formats.format_bytes,
              "formatMiB": formats.format_mib, "formatPercent": formats.format_percent,
              "relativeTime": formats.relative_time, "middleCut": formats.middle_cut, "nameTail": formats.name_tail}
    script = tmp_path / "run.cjs"
    script.write_text(
        "const ts = require(process.argv[2]);\n"
        "const fs = require('fs');\n"
        "const src = fs.readFileSync(process.argv[3], 'utf8');\n"
        "const js = ts.transpileModule(src, {compilerOptions: {module: ts.ModuleKind.CommonJS,"
        " target: ts.ScriptTarget.ES2020}}).outputText;\n"
        "const mod = {exports: {}};\n"
        "new Function('module', 'exports', js)(mod, mod.exports);\n"
        "const cases = JSON.parse(process.argv[4]);\n"
        "const out = {};\n"
        "for (const [fn, args] of Object.entries(cases)) out[fn] = args.map(a => mod.exports[fn](...a));\n"
        "process.stdout.write(JSON.stringify(out));\n")
    done = subprocess.run(["node", str(script), str(EXTENSION / "node_modules" / "typescript"),
                           str(EXTENSION / "src" / "formats.ts"), json.dumps(cases)],
                          capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(done.stdout)
    for fn, args in cases.items():
        assert got[fn] == [python[fn](*a) for a in args], fn


# ------------------------------------------------------------------ the charts' rules (issue 42)

def _zoom_params(spec):
    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("bind") == "scales":
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return found


def test_every_zoom_needs_ctrl_or_cmd_so_a_plain_wheel_scrolls_the_page():
    charts = [specs.panel(name) for name in specs.PANELS]
    charts.append(specs.compare_chart({"a": {"step": [1, 2], "loss": [1.0, 0.5], "epoch": [0], "val_accuracy": [0.5]}}))
    zooms = [z for chart in charts for z in _zoom_params(chart)]
    assert len(zooms) >= 7
    assert all(z["select"]["zoom"] == "wheel![event.ctrlKey || event.metaKey]" for z in zooms)


def test_a_short_runs_time_axis_labels_whole_seconds_once_each():
    vl_convert = pytest.importorskip("vl_convert")
    rows = {"cpu": [{"k": f"{r}-{i}", "t": i * 0.25, "value": 40.0 + i, "rank": str(r)}
                    for i in range(9) for r in (0, 1)]}
    svg = vl_convert.vegalite_to_svg(specs.with_values(specs.panel("cpu"), rows))
    texts = [t for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg) if t]
    labels = texts[:texts.index("seconds since the first sample")]  # the x axis's labels, then its title
    assert labels == ["0", "1", "2"]


def test_a_one_value_axis_reads_its_value_not_six_zeros():
    """Every chart's number axes trim insignificant zeros (a domain of one value has no tick step,
    and Vega then wrote "0.000000"); the counting axes label whole numbers only."""
    charts = [specs.panel(name) for name in specs.PANELS]
    sweep = specs.sweep_chart([{"number": 0, "state": "complete", "value": 0.5, "params": {"lr": 0.1}}],
                              {0: {1: 0.5}}, "acc", True, [("lr", True)])
    charts += [sweep, *specs.report_panels(sweep), specs.concat([specs.panel("cpu")])]
    for chart in charts:
        assert chart["config"]["axisQuantitative"]["format"] == ",~f"
    axes = [e["x"]["axis"] for e in (specs.panel("cpu")["layer"][0]["encoding"],
                                     specs.panel("validation")["layer"][0]["layer"][0]["encoding"])]
    assert all(a["labelExpr"] == "datum.value % 1 ? '' : datum.label" for a in axes)
