"""``lanenb.launch.procs``: the one TERM-then-KILL sequence (cancel, orphans, Ctrl-C), and the
one line type on the supervisor's copy path (it never parses an event)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from lanenb.launch import lines, procs

# prints "ready", then counts the SIGTERMs it gets in a file; "stubborn" ignores them
CHILD = """
import signal, sys, time
got = []
def on_term(signum, frame):
    got.append(signum)
    open(sys.argv[1], "a").write("TERM\\n")
    if sys.argv[2] == "polite":
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def _start(tmp_path, name: str, mode: str) -> tuple[subprocess.Popen, psutil.Process]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / name), mode], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc, psutil.Process(proc.pid)


def test_terminate_sends_one_signal_then_kills_only_what_is_left(tmp_path):
    _polite, polite_ps = _start(tmp_path, "polite", "polite")
    stubborn, stubborn_ps = _start(tmp_path, "stubborn", "stubborn")
    told = []
    started = time.monotonic()
    killed = procs.terminate([polite_ps, stubborn_ps], 1.0, on_kill=told.append)
    assert [p.pid for p in killed] == [stubborn.pid] and [[p.pid for p in t] for t in told] == [[stubborn.pid]]
    assert 1.0 <= time.monotonic() - started < 1.0 + procs.KILL_WAIT
    for ps in (polite_ps, stubborn_ps):  # gone, and reaped (our children): no zombie left
        with pytest.raises(psutil.NoSuchProcess):
            ps.status()
    # exactly one SIGTERM each, never a second one
    assert (tmp_path / "polite").read_text() == "TERM\n" and (tmp_path / "stubborn").read_text() == "TERM\n"


def test_a_zombie_counts_as_stopped_and_our_own_is_reaped(tmp_path):
    _child, child_ps = _start(tmp_path, "z", "polite")
    child_ps.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    while child_ps.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    assert procs.wait_gone([child_ps], 5.0) == [] and time.monotonic() - started < 1.0
    with pytest.raises(psutil.NoSuchProcess):
        child_ps.status()  # reaped: no zombie left behind
    assert procs.terminate([child_ps], 5.0) == []  # a gone process is no error


def test_send_signal_to_a_gone_process_is_quiet():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    procs.send_signal(proc.pid, signal.SIGTERM)
    procs.send_signal(proc.pid, signal.SIGTERM, group=True)


def test_the_supervisors_copy_path_never_parses_an_event(monkeypatch):
    """mpirun output -> whole lines -> job.log: the supervisor only copies, the readers parse."""
    from lanenb_trainer.ranktag import tag_line

    def refuse(text):
        raise AssertionError(f"parsed {text!r}")

    monkeypatch.setattr(lines, "parse_line", refuse)
    raw = ['[1,0]<stdout>:@lanenb {"kind":"step","rank":0,"st[1,1]<stdout>:hi\n',  # Open MPI's 4 KiB chunks
           '[1,0]<stdout>:ep":1}\n', "mpirun: all done\n"]
    written = "".join(tag_line(ln.rank, ln.stream, ln.text) for ln in lines.iter_output(raw))
    assert written == '[1,1]<stdout>:hi\n[1,0]<stdout>:@lanenb {"kind":"step","rank":0,"step":1}\nmpirun: all done\n'


def test_a_line_parses_its_event_once_and_only_when_asked(monkeypatch):
    calls = []
    real = lines.parse_line
    monkeypatch.setattr(lines, "parse_line", lambda text: calls.append(text) or real(text))
    line = lines.LogLine(0, '@lanenb {"kind":"error","rank":0,"message":"boom"}')
    assert calls == []
    assert line.event is line.event and line.event.kind == "error" and line.error
    assert len(calls) == 1
    assert line == lines.LogLine(0, line.text) and str(line) == f"[0] {line.text}"
    assert lines.LogLine(None, "x").tagged() == "[mpirun] x"
