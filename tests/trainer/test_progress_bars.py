"""Progress output suits where it goes: a tqdm bar on a terminal, plain periodic lines in a file,
pipe or CI log (no ``\\r`` redraws), from the one helper every bar uses."""

from __future__ import annotations

import io

import pytest

from lanenb_trainer.progress import LineBar, progress_bar


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_line_bar_writes_a_line_per_interval_and_a_last_line():
    out, clock = io.StringIO(), FakeClock()
    bar = LineBar(range(100), desc="synth frames", unit="frame", file=out, interval=10.0, clock=clock)
    for _ in bar:
        clock.t += 1.0  # one frame a second: 100 updates, a line every 10 s
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 10 + 1, lines
    assert lines[0] == "synth frames: 10/100 frame (10%), 1 frame/s, ETA 0:01:30"
    assert lines[-1] == "synth frames: 100/100 frame (100%) in 0:01:40, 1 frame/s"


def test_line_bar_bytes_postfix_and_settable_counts():
    out, clock = io.StringIO(), FakeClock()
    bar = LineBar(total=0, desc="snapshot run", unit="B", unit_scale=True, file=out, interval=5.0, clock=clock)
    bar.total, bar.n = 4 * 1024**2, 1024**2  # as restic's status messages set them
    clock.t = 5.0
    bar.set_postfix_str("2 rank(s)")
    bar.refresh()
    bar.close()
    bar.close()  # once only
    assert out.getvalue().splitlines() == [
        "snapshot run: 1.0 MiB/4.0 MiB (25%), 204.8 KiB/s, ETA 0:00:15 [2 rank(s)]",
        "snapshot run: 1.0 MiB/4.0 MiB (25%) in 0:00:05, 204.8 KiB/s [2 rank(s)]",
    ]


def test_progress_bar_picks_lines_off_a_terminal_and_tqdm_on_one(monkeypatch):
    monkeypatch.delenv("LANENB_PROGRESS", raising=False)
    log = io.StringIO()
    bar = progress_bar(total=3, desc="x", file=log)
    assert isinstance(bar, LineBar)
    bar.update(3)
    bar.close()
    assert log.getvalue().startswith("x: 3/3 it (100%)") and "\r" not in log.getvalue()

    tty = Terminal()
    bar = progress_bar(total=3, desc="x", file=tty)
    assert not isinstance(bar, LineBar)  # tqdm
    bar.update(3)
    bar.close()
    assert "\r" in tty.getvalue()

    monkeypatch.setenv("LANENB_PROGRESS", "lines")
    assert isinstance(progress_bar(total=1, file=Terminal()), LineBar)
    monkeypatch.setenv("LANENB_PROGRESS", "bars")
    assert not isinstance(progress_bar(total=1, file=io.StringIO()), LineBar)
    monkeypatch.setenv("LANENB_PROGRESS", "fancy")
    with pytest.raises(ValueError, match="LANENB_PROGRESS='fancy': must be auto, lines or bars"):
        progress_bar(total=1)


def test_disabled_bar_passes_iteration_through_silently(capsys):
    assert list(progress_bar(range(3), disable=True)) == [0, 1, 2]
    assert capsys.readouterr() == ("", "")


def test_synth_frames_to_a_log_are_plain_lines(tmp_path, capsys, monkeypatch):
    """`lanenb data synth` (and the bench scripts using it) piped into a CI log: no `\\r` flood."""
    from lanenb_trainer.data.synth import synthesize

    monkeypatch.delenv("LANENB_PROGRESS", raising=False)
    synthesize(tmp_path / "synth", 6, width=256, height=144, progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err
    assert [line for line in err.splitlines() if line.startswith("synth frames:")] == [
        err.splitlines()[-1]]  # frames this fast: only the last line
    assert err.splitlines()[-1].startswith("synth frames: 6/6 frame (100%) in 0:00:0")


def test_console_renderer_draws_its_step_bar_only_on_a_terminal(capsys):
    from lanenb.cli.train import ConsoleRenderer

    assert ConsoleRenderer(Terminal()).tty is True
    renderer = ConsoleRenderer()  # the stdout of the call (captured here), not of the import
    assert renderer.out is __import__("sys").stdout and renderer.tty is False
