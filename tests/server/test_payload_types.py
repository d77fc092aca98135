"""The REST payloads are typed once (``lanenb/server/payloads.py``) and the extension's
TypeScript says the same thing.

Two checks, each failing when a field is added on one side only:

- ``extension/src/api.ts`` is read (a small parser for ``export interface IName [extends
  IOther] { field?: type; ... }``) and each interface's fields, and which are optional, are
  compared with its TypedDict's keys;
- every payload is built by its real producer (``job_summary`` and the job's feed over a real
  registry job and its ``job.log``, ``Sweep.summary``/``detail`` over recorded Optuna studies,
  restic snapshots) and must carry exactly its TypedDict's keys, nested ones included, and every
  key of every TypedDict must be sent by at least one of them.
"""

from __future__ import annotations

import json
import re
import shutil
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from load_jobs import record_job
from server_support import training_script
from sweep_studies import Trial, record_sweep

from lanenb.server import payloads
from lanenb_trainer.ranktag import tag_line

API_TS = Path(__file__).resolve().parents[2] / "extension" / "src" / "api.ts"

# TypeScript interface -> its TypedDict (IName <-> Name)
PAIRS: dict[str, type] = {
    "IUtilisation": payloads.Utilisation, "IStepSplit": payloads.StepSplit, "IVerdict": payloads.Verdict,
    "IFigure": payloads.Figure, "IHeadline": payloads.Headline, "IJobSummary": payloads.JobSummary,
    "IJobStatus": payloads.JobStatus, "IUpdateLine": payloads.UpdateLine, "IUpdate": payloads.Update,
    "IRankRow": payloads.RankRow, "IRunCharts": payloads.RunCharts, "IJobPanelState": payloads.JobPanelState,
    "IUpdateBatch": payloads.UpdateBatch, "IStopReply": payloads.StopReply, "ISnapshot": payloads.Snapshot,
    "IFileChange": payloads.FileChange, "ISnapshotDiff": payloads.SnapshotDiff,
    "IRestoreReply": payloads.RestoreReply, "ISweepBest": payloads.SweepBest,
    "ISweepObjective": payloads.SweepObjective, "ISweepSummary": payloads.SweepSummary,
    "ITrialRow": payloads.TrialRow, "ISearchDimension": payloads.SearchDimension,
    "ISweepSettings": payloads.SweepSettings, "ISweepDetail": payloads.SweepDetail,
    "ISweepStopReply": payloads.SweepStopReply,
}
# TypedDict -> the TypedDict it extends, as its interface extends the other's in api.ts
EXTENDS: dict[type, type] = {payloads.Headline: payloads.Figure, payloads.SweepDetail: payloads.SweepSummary}
# interfaces that describe no payload of the server
CLIENT_ONLY = {"IUpdateOptions": "the options of a request, sent as its query"}
# (interface, field) whose optional-ness may differ from the TypedDict's, and why: none today
OPTIONAL_DIFFERS: dict[tuple[str, str], str] = {}


# ---------------------------------------------------------------------------- api.ts
_TOKENS = re.compile(r"//[^\n]*|/\*.*?\*/|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"|`(?:\\.|[^`\\])*`", re.S)
_HEAD = re.compile(r"export\s+interface\s+(\w+)(?:\s+extends\s+([\w\s,]+?))?\s*\{")
_FIELD = re.compile(r"(?:readonly\s+)?(\w+)(\?)?\s*:", re.S)
_OPEN, _CLOSE = "{[(", "}])"


def _without_comments(text: str) -> str:
    """``text`` with its comments blanked out; strings are kept (a ``//`` in a URL is no comment)."""
    return _TOKENS.sub(lambda m: " " if m.group().startswith("/") else m.group(), text)


def _members(body: str) -> list[str]:
    """The members of an interface body: split at ``;`` outside nested ``{}``, ``[]``, ``()``
    (inline object types, index signatures, function types)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += (ch in _OPEN) - (ch in _CLOSE)
        if ch == ";" and depth == 0:
            out.append(body[start:i])
            start = i + 1
    out.append(body[start:])
    return [m.strip() for m in out if m.strip()]


def _body(text: str, start: int) -> tuple[str, int]:
    """The text between the brace before ``start`` and its match, and where it ends."""
    depth = 1
    for i in range(start, len(text)):
        depth += (text[i] == "{") - (text[i] == "}")
        if depth == 0:
            return text[start:i], i
    raise AssertionError(f"{API_TS}: an interface opened at character {start} is never closed")


def interface_parents(source: str) -> dict[str, list[str]]:
    """``{"IName": ["IParent", ...]}``: what each exported interface extends."""
    return {name: parents for name, (parents, _) in _read(source).items()}


def _read(source: str) -> dict[str, tuple[list[str], dict[str, bool]]]:
    text = _without_comments(source)
    own: dict[str, tuple[list[str], dict[str, bool]]] = {}
    for head in _HEAD.finditer(text):
        body, _ = _body(text, head.end())
        fields: dict[str, bool] = {}
        for member in _members(body):
            m = _FIELD.match(member)
            assert m, f"{API_TS}: interface {head.group(1)}: cannot read member {member!r}"
            fields[m.group(1)] = bool(m.group(2))
        parents = [p.strip() for p in (head.group(2) or "").split(",") if p.strip()]
        own[head.group(1)] = (parents, fields)
    return own


def parse_interfaces(source: str) -> dict[str, dict[str, bool]]:
    """``{"IName": {"field": optional}}`` of every exported interface, inherited fields
    included."""
    own = _read(source)

    def resolved(name: str) -> dict[str, bool]:
        assert name in own, f"{API_TS}: interface {name} is extended but not declared"
        parents, fields = own[name]
        out: dict[str, bool] = {}
        for parent in parents:
            out.update(resolved(parent))
        return {**out, **fields}

    return {name: resolved(name) for name in own}


def test_the_parser_reads_fields_optional_ones_and_inherited_ones_but_not_nested_ones():
    source = """
    // export interface IComment { no: number; }
    /** A doc comment with { braces; } */
    export interface IBase {
      a: number; // trailing
      b?: string | null;
    }
    export interface IChild extends IBase {
      nested: { inner: number; deeper: { x: string } };
      index: { [key: string]: number };
      kind:
        | 'one'
        | 'two';
      fn: (x: number) => void;
    }
    const url = 'http://not/a/comment';
    """
    assert parse_interfaces(source) == {
        "IBase": {"a": False, "b": True},
        "IChild": {"a": False, "b": True, "nested": False, "index": False, "kind": False, "fn": False},
    }
    assert interface_parents(source) == {"IBase": [], "IChild": ["IBase"]}


def test_every_interface_of_api_ts_has_the_fields_of_its_typeddict():
    interfaces = parse_interfaces(API_TS.read_text())
    assert set(interfaces) == set(PAIRS) | set(CLIENT_ONLY), "an interface of api.ts is not paired (PAIRS)"
    typed = {getattr(payloads, name) for name in payloads.__all__}
    assert set(PAIRS.values()) == typed, "a TypedDict of lanenb/server/payloads.py is not paired (PAIRS)"
    problems = []
    for name, td in PAIRS.items():
        ts, py = interfaces[name], set(td.__required_keys__) | set(td.__optional_keys__)
        if set(ts) != py:
            problems.append(f"{name} vs payloads.{td.__name__}: only in api.ts {sorted(set(ts) - py)}, "
                            f"only in payloads.py {sorted(py - set(ts))}")
            continue
        for field, optional in ts.items():
            if optional != (field in td.__optional_keys__) and (name, field) not in OPTIONAL_DIFFERS:
                problems.append(f"{name}.{field}: {'optional' if optional else 'required'} in api.ts, "
                                f"{'NotRequired' if field in td.__optional_keys__ else 'required'} in payloads.py")
    assert not problems, "\n".join(problems)
    extends = {PAIRS[name]: PAIRS[parents[0]] for name, parents in interface_parents(API_TS.read_text()).items()
               if parents}
    assert extends == EXTENDS
    for child, parent in EXTENDS.items():  # a subclass in payloads.py too: its keys and their types
        assert typing.get_type_hints(parent).items() <= typing.get_type_hints(child).items()


# ---------------------------------------------------------------------------- real payloads
class KeyCheck:
    """Checks JSON payloads against their TypedDicts, nested ones included, and remembers which
    keys of which TypedDict were sent."""

    def __init__(self) -> None:
        self.seen: dict[type, set[str]] = {}

    def __call__(self, value: Any, td: type, where: str) -> None:
        value = json.loads(json.dumps(value))  # what the browser gets
        self._walk(value, td, where)

    def _check(self, value: Any, td: type, where: str) -> None:
        assert isinstance(value, dict), f"{where}: {type(value).__name__}, not an object ({td.__name__})"
        keys = set(value)
        required, known = set(td.__required_keys__), set(td.__required_keys__) | set(td.__optional_keys__)
        assert keys <= known and required <= keys, (
            f"{where} (payloads.{td.__name__}): sent but not typed {sorted(keys - known)}, "
            f"typed but not sent {sorted(required - keys)}")
        self.seen.setdefault(td, set()).update(keys)
        hints = typing.get_type_hints(td)
        for key in keys:
            self._walk(value[key], hints[key], f"{where}.{key}")

    def _walk(self, value: Any, tp: Any, where: str) -> None:
        if value is None:
            return
        if typing.is_typeddict(tp):
            self._check(value, tp, where)
            return
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            for arg in args:
                if typing.is_typeddict(arg) or typing.get_origin(arg) in (list, dict):
                    self._walk(value, arg, where)
        elif origin is list:
            for i, item in enumerate(value):
                self._walk(item, args[0], f"{where}[{i}]")
        elif origin is dict:
            for key, item in value.items():
                self._walk(item, args[1], f"{where}[{key!r}]")

    def assert_every_key_sent(self, expected: set[type]) -> None:
        assert set(self.seen) == expected, f"built {sorted(t.__name__ for t in self.seen)}"
        def sent(td: type) -> set[str]:  # an inherited key sent with the parent counts
            return self.seen.get(td, set()) | (sent(EXTENDS[td]) if td in EXTENDS else set())

        unsent = {td.__name__: sorted((set(td.__required_keys__) | set(td.__optional_keys__)) - sent(td))
                  for td in self.seen}
        assert not {k: v for k, v in unsent.items() if v}, f"keys no payload sent: {unsent}"


# which payloads each test builds (every TypedDict is built by one: see the last test)
JOBS = {payloads.Utilisation, payloads.StepSplit, payloads.Verdict, payloads.Figure, payloads.Headline,
        payloads.JobSummary, payloads.JobStatus, payloads.UpdateLine, payloads.Update, payloads.RankRow,
        payloads.RunCharts, payloads.JobPanelState, payloads.UpdateBatch, payloads.StopReply}
SWEEPS = {payloads.SweepBest, payloads.SweepObjective, payloads.SweepSummary, payloads.TrialRow,
          payloads.SearchDimension, payloads.SweepSettings, payloads.SweepDetail, payloads.SweepStopReply}
SNAPSHOTS = {payloads.Snapshot, payloads.FileChange, payloads.SnapshotDiff, payloads.RestoreReply}


def _write_log(run_dir: Path) -> None:
    """The ``job.log`` the local supervisor writes for a finished run: two ranks' events
    (``training_script``: steps, system samples, timing windows, epochs) plus the test evals of
    the last model and of ``best.pt`` (a headline with ``other``), tagged by rank."""
    steps = training_script(steps=6, epochs=3, timing={0: {"data_s": 0.4, "compute_s": 0.6},
                                                         1: {"data_s": 0.4, "compute_s": 0.6}})
    steps = [s for s in steps if s.get("event", {}).get("kind") != "eval"]
    end = next(i for i, s in enumerate(steps) if s.get("event", {}).get("kind") == "end")
    evals = [{"rank": 0, "event": {"kind": "eval", "split": "test", "epoch": 3, "step": 6, "model": model,
                                   "accuracy": acc, "fp": 0.05, "fn": 0.04, "frames": 12}}
             for model, acc in (("last", 0.948), ("best", 0.938))]
    lines = []
    for t, step in enumerate(steps[:end] + evals + steps[end:]):
        if "event" in step:
            text = "@lanenb " + json.dumps({"v": 1, "t": float(t), "rank": step["rank"], **step["event"]})
            lines.append(tag_line(step["rank"], "stdout", text))
        elif "line" in step:
            lines.append(tag_line(step["rank"], "stdout", step["line"]))
    lines.append(tag_line(None, "mpirun", "mpirun: all ranks exited"))
    (run_dir / "job.log").write_text("".join(lines))


def test_job_payloads_send_exactly_their_fields(lanenb_home):
    from lanenb.analysis.summary import error_summary
    from lanenb.jobs import get_job
    from lanenb.server import api

    row = record_job(lanenb_home, "typed", state="succeeded", finished=2000.0, running_here=False)
    _write_log(Path(row["run_dir"]))
    check = KeyCheck()

    listed = api.list_job_summaries(50)
    check(listed[0], payloads.JobSummary, "jobs[0]")
    assert listed[0]["verdict"] and listed[0]["headline"]["other"] and listed[0]["breakdown"]  # all nested built
    check(error_summary(get_job("typed"), OSError("cluster unreachable")), payloads.JobSummary, "jobs[error]")

    batch = dict(api.job_updates("typed", None))
    batch["state"] = api.job_panel_state("typed")  # what the handler adds for state=1
    check(batch, payloads.UpdateBatch, "updates")
    assert batch["state"]["ranks"] and batch["state"]["charts"]["specs"] and batch["state"]["verdict"]
    assert {"status", "line", "event", "display"} <= {k for u in batch["updates"] for k in u}
    check(api.stop_job("typed", "typed"), payloads.StopReply, "stop")

    check.assert_every_key_sent(JOBS)


def test_the_panel_state_is_what_the_panel_draws_and_metrics_keep_the_whole_history(lanenb_home):
    """The trimmed ``state`` of ``updates?state=1`` next to ``metrics`` (scripts): the same
    facts, and the raw histories only in ``metrics``."""
    from lanenb.server import api

    row = record_job(lanenb_home, "typed", state="succeeded", finished=2000.0, running_here=False)
    _write_log(Path(row["run_dir"]))
    panel, metrics = api.job_panel_state("typed"), api.job_metrics("typed")
    assert set(panel) == set(payloads.JobPanelState.__required_keys__)
    assert not {"series", "epochs", "system", "timing", "breakdown"} & set(panel)
    assert {k: metrics[k] for k in panel} == json.loads(json.dumps(panel))  # one state, two routes
    assert metrics["series"]["loss"]["x"] == [1, 2, 3, 4, 5, 6] and set(metrics["system"]) == {"0", "1"}
    assert metrics["feed"]["reads"] >= 1  # bench/load.py counts log reads with it


def test_sweep_payloads_send_exactly_their_fields():
    import optuna

    from lanenb.server import api
    from lanenb.sweeps.study import storage_url

    record_sweep("typed", [Trial({"lr": 0.01, "momentum": 0.9}, [0.6, 0.7]),
                           Trial({"lr": 0.001, "momentum": 0.8}, [0.3], "pruned")])
    optuna.create_study(study_name="unreadable", storage=storage_url())  # no lanenb settings: an error row
    check = KeyCheck()
    rows = {r["name"]: r for r in api.list_sweep_summaries()}
    assert "error" in rows["unreadable"] and rows["typed"]["best"]
    for name, row in rows.items():
        check(row, payloads.SweepSummary, f"sweeps[{name}]")
    check(api.sweep_detail("typed"), payloads.SweepDetail, "sweep")
    check(api.stop_sweep("typed", "typed"), payloads.SweepStopReply, "stop")
    check.assert_every_key_sent(SWEEPS)


def test_snapshot_payloads_send_exactly_their_fields(tmp_path):
    if shutil.which("restic") is None:
        pytest.skip("restic is not installed (Debian package restic; scripts/setup.sh)")
    import lanenb.snapshots as snaps
    from lanenb.server import api

    volume = tmp_path / "dataset"
    volume.mkdir()
    (volume / "a.txt").write_text("one")
    first = snaps.create(str(volume), {"job": "lane-1"}, name="v1")
    (volume / "b.txt").write_text("two")
    second = snaps.create(str(volume), name="v2")
    check = KeyCheck()
    for i, item in enumerate(api.list_snapshots()):
        check(item, payloads.Snapshot, f"snapshots[{i}]")
    check(api.diff_snapshots(first.id, second.id), payloads.SnapshotDiff, "diff")
    check(api.restore_snapshot(first.id, "restored", root_dir=tmp_path), payloads.RestoreReply, "restore")
    check.assert_every_key_sent(SNAPSHOTS)


def test_every_typeddict_is_built_by_a_real_producer():
    assert {getattr(payloads, name) for name in payloads.__all__} == JOBS | SWEEPS | SNAPSHOTS
