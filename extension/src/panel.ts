// A job's main-area panel: status line, Stop, the doctor's verdict (why the run is slow),
// charts (loss, throughput, utilisation, validation accuracy, per-rank step split) and the live log, all from one stream: the job's update stream (the
// notebook view's Job.poll cursors, long-polled), whose replies carry the server's reduced
// state of the job when asked, so the charts need no second request.
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { api, IRunState } from './api';
import { runCharts } from './charts';
import { confirmStop } from './sidebar';

const MAX_LOG_LINES = 2000;
const LONG_POLL_S = 20; // under the server's 25 s limit and common proxy idle timeouts
const CHARTS_EVERY_MS = 3000; // the reduced state is a few KB per series: not with every line

export class JobPanel extends Widget {
  constructor(readonly jobName: string) {
    super();
    this.id = `lanenb-job-${jobName}`;
    this.addClass('lanenb-job-panel');
    this.title.label = `Job ${jobName}`;
    this.title.closable = true;
    this._status = document.createElement('div');
    this._status.className = 'lanenb-panel-status';
    this._stop = document.createElement('button');
    this._stop.className = 'lanenb-stop jp-mod-styled jp-mod-warn';
    this._stop.textContent = 'Stop';
    this._stop.onclick = async () => {
      if (await confirmStop(jobName)) {
        void this._poll.refresh();
      }
    };
    const head = document.createElement('div');
    head.className = 'lanenb-panel-head';
    head.append(this._status, this._stop);
    this._verdict = document.createElement('div');
    this._verdict.className = 'lanenb-verdict';
    this._charts = document.createElement('div');
    this._charts.className = 'lanenb-charts';
    this._log = document.createElement('pre');
    this._log.className = 'lanenb-log';
    this.node.append(head, this._verdict, this._charts, this._log);
    this._poll = new Poll({
      auto: true,
      factory: () => this.tick(),
      frequency: { interval: 1000, backoff: true, max: 20000 },
      name: `lanenb:job:${jobName}`,
      standby: 'when-hidden'
    });
  }

  dispose(): void {
    this._poll.dispose();
    super.dispose();
  }

  /** One read of the stream at a time: a refresh (after Stop) while a long poll is out joins
   * it instead of reading the same cursor twice (which would log lines twice). */
  private tick(): Promise<void> {
    if (!this._reading) {
      this._reading = this.read().finally(() => {
        this._reading = null;
      });
    }
    return this._reading;
  }

  private async read(): Promise<void> {
    const first = this._cursor === null;
    const chartsDue = this._final || Date.now() - this._chartsAt >= CHARTS_EVERY_MS;
    const batch = await api.updates(this.jobName, this._cursor, {
      tail: MAX_LOG_LINES, // a new panel starts at the live end, not at the log's first line
      // charts owed for lines already shown are fetched now rather than with the next line
      wait: first || this._final || (chartsDue && this._chartsOwed) ? 0 : LONG_POLL_S,
      state: first || chartsDue
    });
    if (this.isDisposed) {
      return;
    }
    this._cursor = batch.cursor;
    this.appendLog(batch.updates.map(u => u.display).filter(Boolean) as string[]);
    if (batch.status) {
      this._state = batch.status.state;
    }
    this._final = batch.final;
    if (batch.state) {
      this._run = batch.state;
      this._chartsAt = Date.now();
      this._chartsOwed = false;
      this._chartsFinal = batch.final;
      this._charts.replaceChildren(...runCharts(batch.state));
    } else if (batch.updates.length > 0) {
      this._chartsOwed = true;
    }
    this.drawStatus();
    this._stop.hidden = this._final;
    if (this._final && this._chartsFinal) {
      await this._poll.stop();
    }
  }

  private drawStatus(): void {
    const run = this._run;
    const state = this._state || run?.state || '';
    const steps = run?.total_steps ? ` · step ${run.step}/${run.total_steps}` : '';
    // the server's words for the headline, so the panel says what the notebook says
    const acc = run?.headline
      ? ` · ${run.headline.text}`
      : run && run.accuracy !== null
        ? ` · accuracy ${run.accuracy.toFixed(4)}`
        : '';
    this._status.textContent = `${this.jobName}: ${state}${steps}${acc}`;
    this._status.dataset.state = state;
    const verdict = run?.verdict;
    const measured = verdict && (verdict.kind !== 'unknown' || run?.breakdown);
    this._verdict.textContent = measured ? verdict.line : '';
    this._verdict.dataset.kind = measured ? verdict.kind : '';
    this._verdict.hidden = !measured;
  }

  private appendLog(lines: string[]): void {
    if (lines.length === 0) {
      return;
    }
    const stick =
      this._log.scrollTop + this._log.clientHeight >= this._log.scrollHeight - 4;
    this._lines.push(...lines);
    if (this._lines.length > MAX_LOG_LINES) {
      this._lines.splice(0, this._lines.length - MAX_LOG_LINES);
    }
    this._log.textContent = this._lines.join('\n');
    if (stick) {
      this._log.scrollTop = this._log.scrollHeight;
    }
  }

  private _cursor: string | null = null;
  private _final = false;
  private _state = '';
  private _run: IRunState | null = null;
  private _reading: Promise<void> | null = null;
  private _chartsAt = 0;
  private _chartsOwed = false;
  private _chartsFinal = false;
  private readonly _lines: string[] = [];
  private readonly _status: HTMLDivElement;
  private readonly _verdict: HTMLDivElement;
  private readonly _stop: HTMLButtonElement;
  private readonly _charts: HTMLDivElement;
  private readonly _log: HTMLPreElement;
  private readonly _poll: Poll;
}
