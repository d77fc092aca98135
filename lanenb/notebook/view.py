"""``JobView``: the live view of one job, used by ``%lanetrain``, ``%laneshow`` and the panel.

A status line, the doctor's verdict (why the run is slow, e.g. "input-bound: ranks wait 41% of
each step for data; ..."), a progress bar with ETA, a per-rank table, charts (loss and LR,
validation, throughput, per-rank GPU or CPU/RSS, where each rank's step goes) and a bounded
log pane with a rank filter and errors in red. Beside Stop: Suspend or Resume (as the job's
state and its backend allow) and, when the doctor's advice is one setting a resume can change,
Apply ("Apply: loader workers 6"); each runs on a thread of its own (it waits for the ranks)
and says on its message line what happened. One background thread per view polls
``Job.poll`` and folds the updates into a ``RunState`` (the one reducer): the kernel's main
thread is never used, so cells stay responsive while the job trains. The thread pauses for
good once the job is final and stops when the widget is closed.
"""

from __future__ import annotations

import copy
import html
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from lanenb.analysis.chartdata import STATIC_LIMIT, rank_table, run_png, run_rows, run_specs
from lanenb.analysis.doctor import shown_verdict
from lanenb.analysis.runstate import SETTINGS, RunState, fill_config, format_duration
from lanenb.charts import vocabulary
from lanenb.charts.formats import format_value
from lanenb.contract.status import JobStatus
from lanenb.jobs import RunDirGoneError
from lanenb.jobs.job import RESUMABLE, SUSPENDABLE, Job
from lanenb.notebook.charts_widget import LiveCharts
from lanenb.notebook.fallback import StaticFallback

_ERROR = vocabulary.colour("error")
# the states ``Job.suspend`` and ``Job.resume`` accept (the job's own rule), as RunState names them
_CAN_SUSPEND = frozenset(s.value for s in SUSPENDABLE)
_CAN_RESUME = frozenset(s.value for s in RESUMABLE)
_HIDDEN, _SHOWN = "none", ""

__all__ = ["JobView"]

# the newest view of each job in this kernel: a second view starts from its state and cursor
_VIEWS: weakref.WeakValueDictionary[str, JobView] = weakref.WeakValueDictionary()


class JobView(StaticFallback, widgets.VBox):
    """Live view of ``job``: status, progress and ETA, per-rank table, charts and logs.

    Polls from a background thread, so the notebook stays usable while the job trains; a second
    view of the same job in this kernel starts from the first one's state instead of replaying
    the whole log.

    Args:
        job: the ``Job`` to watch (from ``submit``, ``get_job`` or ``%lanetrain``).
        refresh: seconds between polls (>= 0.1); 0.5 s by default, so an event is on screen
            within about half a second (nvdashboard refreshes at 1 s).
        chart_interval: seconds between chart updates while running (each sends the charts'
            bounded rows; the browser applies only what changed).
        log_lines: lines shown in the log pane (the state keeps more).
        start: start the background thread now (False: call ``start()`` once it is displayed).
        **kwargs: passed to ``ipywidgets.VBox`` (``layout`` ...).

    Raises:
        SpecError: ``job`` is not a ``Job``.
        ValueError: ``refresh`` is below 0.1 s.
    """

    def __init__(self, job: Job, *, refresh: float = 0.5, chart_interval: float = 2.0, log_lines: int = 200,
                 start: bool = True, **kwargs: Any) -> None:
        if not isinstance(job, Job):
            from lanenb.contract.spec import SpecError

            raise SpecError("job", job, "must be a lanenb Job (from submit, get_job or %lanetrain)")
        if not refresh >= 0.1:
            raise ValueError(f"refresh={refresh!r}: must be >= 0.1 seconds")
        self.job = job
        self.refresh_s = float(refresh)
        self.chart_interval = float(chart_interval)
        self.log_lines = int(log_lines)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._png: bytes | None = None
        self._charted_events: tuple[int, str] | None = None
        self._charted_at = 0.0
        self.final = False
        self.refreshes = 0
        self.last_error: str | None = None
        self._acting: str | None = None  # the button action running now ("suspend" ...), if any
        self.action_thread: threading.Thread | None = None
        self.state: RunState
        self.cursor: str | None
        earlier = _VIEWS.get(job.name)
        if earlier is not None:
            with earlier._lock:
                self.state, self.cursor = copy.deepcopy(earlier.state), earlier.cursor
                self._png = earlier._png
        else:
            self.state, self.cursor = RunState(), None
            fill_config(self.state, job)  # the doctor's advice names the spec's loader workers

        self.title = widgets.HTML()
        self.verdict = widgets.HTML()
        self.progress = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, description="progress",
                                              bar_style="info", layout=widgets.Layout(width="60%"))
        self.eta = widgets.Label()
        self.stop_button = widgets.Button(description="Stop", button_style="danger", icon="stop",
                                          tooltip="cancel this job (every rank)")
        self.stop_button.on_click(self._on_stop)
        self.suspend_button = widgets.Button(description="Suspend", icon="pause",
                                             tooltip=f"checkpoint job {job.name} at the next step and free its cores")
        self.suspend_button.on_click(self._on_suspend)
        self.resume_button = widgets.Button(description="Resume", icon="play",
                                            tooltip=f"continue job {job.name} from its checkpoint")
        self.resume_button.on_click(self._on_resume)
        self.apply_button = widgets.Button(description="Apply", icon="wrench")
        self.apply_button.on_click(self._on_apply)
        self._change: dict[str, Any] | None = None  # the shown verdict's change (what Apply applies)
        self.message = widgets.HTML()  # what the last Suspend/Resume/Apply did, or why it failed
        self.banner = widgets.HTML()
        self.ranks = widgets.HTML()
        self.charts = LiveCharts(layout=widgets.Layout(width="100%"))
        self.rank_filter = widgets.Dropdown(options=[("all ranks", "all")], value="all", description="log",
                                            layout=widgets.Layout(width="220px"))
        self.errors_only = widgets.Checkbox(value=False, description="errors only", indent=False)
        self.rank_filter.observe(lambda _c: self._render_log(), names="value")
        self.errors_only.observe(lambda _c: self._render_log(), names="value")
        self.log_pane = widgets.HTML()
        super().__init__(children=[
            self.title, self.verdict,
            widgets.HBox([self.progress, self.eta, self.stop_button, self.suspend_button, self.resume_button,
                          self.apply_button]),
            self.message, self.banner,
            self.ranks, self.charts, widgets.HBox([self.rank_filter, self.errors_only]), self.log_pane,
        ], **kwargs)
        _VIEWS[job.name] = self
        self._render(charts=False)  # charts are drawn by the thread: the magic returns at once
        if start:
            self.start()

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        """Start the polling thread (again, after ``finish()``); does nothing while it runs."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"lanenb-view-{self.job.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                if self.update():
                    return
                failures = 0
            except RunDirGoneError as exc:  # for good: say so and stop, nothing to retry
                self.last_error = str(exc)
                self.banner.value = (f"<div style='color:{_ERROR}'><b>stopped following</b>: "
                                     f"{html.escape(str(exc))}</div>")
                self._retire_stop()
                return
            except Exception as exc:  # a flaky API server must not kill the view
                failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                self.banner.value = (f"<div style='color:{_ERROR}'>cannot read the job right now "
                                     f"({html.escape(self.last_error)}); retrying</div>")
            delay = self.refresh_s * min(2 ** failures, 30)
            self._stop.wait(max(0.0, delay - (time.monotonic() - t0)))

    def _retire_stop(self) -> None:
        """Nothing left to stop: the button greys out (a red disabled Stop read as an alarm)."""
        self.stop_button.disabled = True
        self.stop_button.button_style = ""

    def update(self) -> bool:
        """Poll once, fold, redraw: what the thread does every ``refresh`` seconds, callable
        by hand when the view was made with ``start=False``.

        Returns:
            True once the job is final (then the charts are final too).

        Raises:
            Exception: whatever reading the job raised (the thread shows it and retries).
        """
        batch = self.job.poll(self.cursor)
        with self._lock:
            self.state.apply_all(batch.updates)
            self.cursor = batch.cursor
            self.refreshes += 1
        if batch.final:
            self._render(charts=True)
            self._render_png()
            self._retire_stop()
            self.final = True
            self.refresh_display()
            return True
        if batch.updates:  # nothing new: no redraw, no widget traffic
            self._render(charts=time.monotonic() - self._charted_at >= self.chart_interval)
        elif ((self.state.events_seen, self.state.state) != self._charted_events
              and time.monotonic() - self._charted_at >= self.chart_interval):
            self._render(charts=True)  # the last events of a burst reach the charts too
        return False

    def finish(self, timeout: float = 60.0) -> bool:
        """Stop the thread and bring the view to the job's final state now, on this thread
        (what ``%lanetrain --wait`` does before the cell ends, so a headless run saves it).

        Args:
            timeout: the most seconds to wait for the job to become final.

        Returns:
            True if the job was final within ``timeout`` seconds.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(self.refresh_s * 3, 5.0))
        deadline = time.monotonic() + timeout
        while not self.final and time.monotonic() < deadline:
            if self.update():
                break
            time.sleep(min(0.2, self.refresh_s))
        return self.final

    def close(self) -> None:
        """Closing the widget stops its thread."""
        stop = getattr(self, "_stop", None)  # close() also runs on a half-built view being collected
        if stop is not None:
            stop.set()
        super().close()

    @property
    def running(self) -> bool:
        """The polling thread is alive (False once the job is final or the view is closed)."""
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------------ drawing
    def _on_stop(self, _button: Any) -> None:
        self.stop_button.disabled = True
        self.stop_button.description = "stopping..."

        def stop() -> None:  # cancel waits for the ranks to exit: not on the kernel's thread
            try:
                status = self.job.cancel()
                self.banner.value = f"<b>stopped</b>: {html.escape(str(status))}"
            except Exception as exc:
                self.banner.value = f"<div style='color:{_ERROR}'>stop failed: {html.escape(str(exc))}</div>"
                self.stop_button.disabled = False
            self.stop_button.description = "Stop"

        threading.Thread(target=stop, daemon=True).start()

    def _on_suspend(self, _button: Any = None) -> None:
        self._act("suspend", "suspending", self.job.suspend)

    def _on_resume(self, _button: Any = None) -> None:
        self._act("resume", "resuming", self.job.resume)

    def _on_apply(self, _button: Any = None) -> None:
        change = self._change
        if change is None:
            return
        setting, value = change["setting"], change["value"]
        words = f"{SETTINGS.get(setting, setting)} {value}"
        self._act(f"apply {words}", f"applying {words}", lambda: self.job.apply_change(setting, value))

    def _act(self, verb: str, doing: str, action: Callable[[], JobStatus]) -> None:
        """Run ``action`` (Suspend, Resume, Apply: seconds, it waits for the ranks) on a thread
        of its own, not the kernel's (``action_thread``); the three buttons are disabled
        meanwhile and the message line says what happened, or the error in one line."""
        with self._lock:
            if self._acting is not None:
                return
            self._acting = verb
        name = html.escape(self.job.name)
        self.message.value = f"{html.escape(doing)} <b>{name}</b>..."
        self._show_controls()

        def work() -> None:
            try:
                status = action()
            except Exception as exc:  # the job's words (JobStateError, SpecError ...), never a traceback
                self.message.value = (f"<div style='color:{_ERROR}'>could not {html.escape(verb)} <b>{name}</b>: "
                                      f"{html.escape(str(exc))}</div>")
            else:
                self.message.value = f"<b>{name}</b>: {html.escape(str(status))}"
                with self._lock:
                    self.state.fold_status(status)  # the newest truth; the next poll agrees
                if self.final and not status.state.finished and not self._stop.is_set():
                    self.final = False  # a preempted run resumed: follow it again
                    self.stop_button.disabled = False
                    self.start()
            finally:
                with self._lock:
                    self._acting = None
                self._render()

        self.action_thread = threading.Thread(target=work, name=f"lanenb-{verb.split()[0]}-{self.job.name}",
                                              daemon=True)
        self.action_thread.start()

    def _show_controls(self, verdict_change: Any = ...) -> None:
        """Suspend while the job may be suspended, Resume while it may be resumed, Apply with a
        change the backend can make on resume, each only where the backend can; all disabled
        while one action runs. ``verdict_change``: the shown verdict's change, kept for Apply
        (left out: the last one drawn)."""
        if verdict_change is not ...:
            self._change = verdict_change
        with self._lock:
            state, busy, change = self.state.state, self._acting is not None, self._change
        can = self._backend_abilities()
        suspendable = state in _CAN_SUSPEND and can["suspend"]
        resumable = state in _CAN_RESUME and can["resume"]
        offer = (change if suspendable and can["resume"] and isinstance(change, dict)
                 and change.get("setting") in can["changes"] else None)
        self.suspend_button.layout.display = _SHOWN if suspendable else _HIDDEN
        self.resume_button.layout.display = _SHOWN if resumable else _HIDDEN
        self.apply_button.layout.display = _SHOWN if offer is not None else _HIDDEN
        if offer is not None:
            setting, value = offer["setting"], offer["value"]
            self.apply_button.description = f"Apply: {SETTINGS.get(setting, setting)} {value}"
            self.apply_button.tooltip = (f"suspend job {self.job.name} at a step boundary and resume it with "
                                         f"{setting}={value} (the doctor's advice)")
        for button in (self.suspend_button, self.resume_button, self.apply_button):
            button.disabled = busy

    def _backend_abilities(self) -> dict[str, Any]:
        """What the job's backend can do here (asked once): suspend, resume, the settings a
        resume may change. A backend that cannot be built here (no cluster) offers nothing."""
        found = getattr(self, "_abilities", None)
        if found is None:
            try:
                backend = self.job.backend
                found = {"suspend": backend.can("suspend"), "resume": backend.can("resume"),
                         "changes": frozenset(backend.resume_changes)}
            except Exception:  # the buttons are an offer: none rather than a broken view
                found = {"suspend": False, "resume": False, "changes": frozenset()}
            self._abilities = found
        return found

    def _render(self, charts: bool = False) -> None:
        with self._lock:
            s = self.state
            colour = vocabulary.colour(vocabulary.state_severity(s.state))
            batch = f", global batch {s.global_batch}" if s.global_batch else ""
            where = f"{s.world_size} ranks, {s.engine}, {s.device}{batch}" if s.world_size else ""
            title = (f"<b>{html.escape(self.job.name)}</b> ({html.escape(self.job.backend_name)}) "
                     f"<span style='color:{colour};font-weight:bold'>{html.escape(s.state)}</span> "
                     f"{html.escape(where)}<br><code>{html.escape(s.summary())}</code>")
            verdict = shown_verdict(s)
            verdict_html = ("" if verdict is None else
                            f"<span style='color:{vocabulary.colour(verdict.severity)}'>"
                            f"<b>{html.escape(verdict.kind)}</b>: {html.escape(str(verdict)[len(verdict.kind) + 2:])}"
                            f"</span>")
            progress = s.progress
            eta = s.eta_s
            errors = list(s.errors)
            rank_rows = self._rank_table()
            ranks = s.ranks()
            drawn = None
            chart_key = (s.events_seen, s.state)
            if charts and chart_key != self._charted_events:
                drawn = run_specs(s), run_rows(s)
                self._charted_events = chart_key
        if drawn is not None:
            self.charts.draw(*drawn)
            self._charted_at = time.monotonic()
        with self.hold_sync():
            self.title.value = title
            self.verdict.value = verdict_html
            if progress is not None:
                self.progress.value = progress
            self.progress.bar_style = {"succeeded": "success", "failed": "danger",
                                       "cancelled": "warning"}.get(s.state, "info")
            # "done" only for a run that succeeded; a failed, cancelled or preempted one says so
            self.eta.value = (f"ETA {format_duration(eta)}" if eta is not None
                              else ("done" if s.state == "succeeded" else s.state if s.finished else ""))
            if errors:
                first = errors[0]
                self.banner.value = (f"<div style='color:{_ERROR}'><b>rank {first['rank']} failed: "
                                     f"{html.escape(str(first['type']))}: {html.escape(str(first['message']))}"
                                     f"</b></div>")
            self.ranks.value = rank_rows
            self._show_controls(None if verdict is None else verdict.change)
            options = [("all ranks", "all"), ("launcher", None)] + [(f"rank {r}", r) for r in ranks]
            if [o[1] for o in self.rank_filter.options] != [o[1] for o in options]:
                self.rank_filter.options = options
        self._render_log()

    def _rank_table(self) -> str:
        rows = rank_table(self.state)
        if not rows:
            return ""
        gpu = any(r["gpu_util"] is not None for r in rows)
        multi = len({r["host"] for r in rows if r["host"]}) > 1
        timed = any(r["step_s"] is not None for r in rows)
        head = ["rank"] + (["host"] if multi else []) + (["GPU %", "GPU MiB"] if gpu else []) + ["CPU %", "RSS MiB"]
        if timed:
            head += ["s/step", "data", "compute", "exchange", "other"]
        cells_html = []
        for r in rows:
            cells = [str(r["rank"])] + ([html.escape(r["host"] or "-")] if multi else [])
            if gpu:
                cells += [_cell(r["gpu_util"]), f"{_cell(r['gpu_mem_mb'])} / {_cell(r['gpu_mem_total_mb'])}"]
            cells += [_cell(r["cpu_percent"]), _cell(r["rss_mb"])]
            if timed:
                cells += ([f"{r['step_s']:.3g}"] + [f"{r[p]:.0%}" for p in ("data", "compute", "exchange", "other")]
                          if r["step_s"] is not None else ["-"] * 5)
            cells_html.append("<tr>" + "".join(f"<td style='padding:0 8px'>{c}</td>" for c in cells) + "</tr>")
        heads = "".join(f"<th>{h}</th>" for h in head)
        return f"<table><tr>{heads}</tr>{''.join(cells_html)}</table>"

    def _render_log(self) -> None:
        with self._lock:
            entries = self.state.log_tail(self.log_lines, self.rank_filter.value, self.errors_only.value)
            seen = self.state.lines_seen
        rows = []
        for e in reversed(entries):  # newest first in the DOM: column-reverse shows it at the bottom
            who = "launcher" if e.rank is None else f"{e.rank}"
            text = html.escape(f"[{who}] {e.text}")
            style = f"color:{_ERROR};font-weight:bold;" if e.error else ""
            rows.append(f"<div style='{style}white-space:pre-wrap'>{text}</div>")
        # a column-reverse scroll box starts scrolled to its end: the newest lines are in view
        self.log_pane.value = (
            "<div style='display:flex;flex-direction:column-reverse;max-height:260px;overflow:auto;"
            "border:1px solid #ddd;padding:4px;font-family:monospace;font-size:11px;line-height:1.35'>"
            + "".join(rows) + f"</div><small>{len(entries)} shown, {seen} lines received</small>")

    # ------------------------------------------------------------------ headless
    def _render_png(self) -> None:
        """The final charts as one PNG for the saved notebook (headless runs show it; JupyterLab
        shows the live widget). Drawn once, at the end, in a process of its own (a few seconds
        for a long run's grid, the kernel free meanwhile); a failure keeps the text only."""
        with self._lock:
            title = f"{self.job.name}: {self.state.state}"
            specs, rows = run_specs(self.state), run_rows(self.state, STATIC_LIMIT)
        try:
            self._png = run_png(specs, rows, title=title)
        except (RuntimeError, ValueError, OSError) as exc:
            self.last_error = f"no static chart image: {exc}"

    def static_png(self) -> bytes | None:
        return self._png

    def static_text(self) -> str:
        with self._lock:
            tail = self.state.log_tail(15)
            summary = self.state.summary()
            verdict = shown_verdict(self.state)
        lines = [f"{self.job.name} ({self.job.backend_name}): {summary}"]
        if verdict is not None:
            lines.append(str(verdict))
        lines += [f"[{'launcher' if e.rank is None else e.rank}] {e.text}" for e in tail]
        if self.final and self._png is None and self.last_error:
            lines.append(self.last_error)  # a reader of the saved notebook sees why the charts are missing
        return "\n".join(lines)


def _cell(value: Any) -> str:
    return format_value(value, ".0f")  # percentages and MiB: whole numbers
