// A job's main-area panel: a status head (state chip, progress with ETA, the headline with its
// model label, Stop), the doctor's verdict, the run's interactive charts (the notebook view's
// Vega-Lite panels, drawn by vegacharts.ts), a per-rank table and the live log with a rank
// filter, all from one stream: the job's update stream (the notebook view's Job.poll cursors,
// long-polled), whose replies carry the server's reduced state when asked, so the charts need
// no second request.
import { caretDownEmptyIcon } from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { api, IJobPanelState, IRankRow } from './api';
import { el, epochText, formatDuration, formatPercent, MISSING, stateChip } from './dom';
import { pauseButtons } from './pause';
import { confirmStop } from './sidebar';
import { ChartGrid } from './vegacharts';

const MAX_LOG_LINES = 2000;
const LONG_POLL_S = 20; // under the server's 25 s limit and common proxy idle timeouts
const CHARTS_EVERY_MS = 2000; // the reduced state is bounded (a few hundred rows a series)

interface ILogLine {
  rank: number | null;
  text: string;
  error: boolean;
}

function fmt(v: number | null | undefined, digits = 0): string {
  return v === null || v === undefined ? MISSING : v.toFixed(digits);
}

const share = formatPercent;

export class JobPanel extends Widget {
  constructor(readonly jobName: string) {
    super();
    this.id = `lanenb-job-${jobName}`;
    this.addClass('lanenb-job-panel');
    this.title.label = `Job ${jobName}`;
    this.title.closable = true;
    this._chip = stateChip('');
    this._status = el('div', 'lanenb-panel-status');
    this._progress = el('progress', 'lanenb-panel-progress');
    this._progress.max = 1;
    this._eta = el('span', 'lanenb-panel-eta');
    this._stop = el('button', 'lanenb-stop jp-mod-styled jp-mod-warn', 'Stop');
    this._stop.onclick = async () => {
      if (await confirmStop(jobName)) {
        void this._poll.refresh();
      }
    };
    const head = el('div', 'lanenb-panel-head');
    this._pause = el('span', 'lanenb-panel-pause');
    head.append(this._chip, this._status, this._progress, this._eta, this._stop, this._pause);
    this._headline = el('div', 'lanenb-panel-headline');
    this._verdict = el('div', 'lanenb-verdict');
    this._grid = new ChartGrid();
    this._ranks = el('table', 'lanenb-ranks');
    // JupyterLab's own select (the HTMLSelect component's markup): a caret, the theme's colours
    this._filter = el('select', 'lanenb-log-filter');
    this._filter.setAttribute('aria-label', 'show the log of');
    const filterBox = el('div', 'jp-HTMLSelect jp-DefaultStyle lanenb-log-filter-box');
    filterBox.append(
      this._filter,
      caretDownEmptyIcon.element({ tag: 'span', stylesheet: 'select', right: '4px', top: '4px' })
    );
    this._filter.onchange = () => this.drawLog();
    this._errorsOnly = el('input', 'lanenb-log-errors');
    this._errorsOnly.type = 'checkbox';
    this._errorsOnly.onchange = () => this.drawLog();
    const errorsLabel = el('label', 'lanenb-log-errors-label');
    errorsLabel.append(this._errorsOnly, ' errors only');
    this._logCount = el('span', 'lanenb-log-count');
    const logHead = el('div', 'lanenb-log-head');
    logHead.append(el('span', 'lanenb-log-title', 'Log'), filterBox, errorsLabel, this._logCount);
    this._log = el('pre', 'lanenb-log');
    this._log.tabIndex = 0;
    this.node.append(
      head,
      this._headline,
      this._verdict,
      this._grid.node,
      this._ranks,
      logHead,
      this._log
    );
    this.setFilterOptions();
    this._poll = new Poll({
      auto: true,
      factory: () => this.tick(),
      frequency: { interval: 1000, backoff: true, max: 20000 },
      name: `lanenb:job:${jobName}`,
      standby: 'when-hidden'
    });
  }

  /** The charts (tests and benchmarks reach the Vega views through it). */
  get grid(): ChartGrid {
    return this._grid;
  }

  dispose(): void {
    this._poll.dispose();
    this._grid.dispose();
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
    const lines: ILogLine[] = [];
    for (const u of batch.updates) {
      if (u.display) {
        const rank = u.line ? u.line.rank : null;
        lines.push({ rank, text: u.display, error: Boolean(u.line?.error) });
      }
    }
    this.appendLog(lines);
    if (batch.status) {
      this._state = batch.status.state;
    }
    this._final = batch.final;
    if (batch.state) {
      this._run = batch.state;
      this._chartsAt = Date.now();
      this._chartsOwed = false;
      this._chartsFinal = batch.final;
      this._grid.setSpecs(batch.state.charts.specs);
      void this._grid.setData(batch.state.charts.rows);
      this.drawRanks(batch.state.ranks);
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
    this._chip.textContent = state || '…';
    this._chip.dataset.state = state;
    const steps = run?.total_steps ? `step ${run.step}/${run.total_steps}` : run?.step ? `step ${run.step}` : '';
    const epoch = run?.epochs_total ? epochText(run.epoch, run.epochs_total) : ''; // "epoch 8/8", as the notebook says
    const world = run?.world_size ? `${run.world_size} ranks` : '';
    this._status.textContent = [this.jobName, world, steps, epoch].filter(Boolean).join(' · ');
    this._status.dataset.state = state;
    this._progress.value = run?.progress ?? (this._final ? 1 : 0);
    this._eta.textContent =
      run?.eta_s !== null && run?.eta_s !== undefined && !this._final
        ? `ETA ${formatDuration(run.eta_s)}`
        : this._final
          ? 'done'
          : '';
    // the server's words for the headline, so the panel says what the notebook says
    this._headline.textContent = run?.headline ? run.headline.text : '';
    this._headline.hidden = !run?.headline;
    const verdict = run?.verdict; // null when the server's one rule shows none
    this._verdict.textContent = verdict ? verdict.line : '';
    this._verdict.dataset.kind = verdict ? verdict.kind : '';
    this._verdict.hidden = !verdict;
    // Suspend / Resume / Apply: redrawn only when what they offer changes (a click is not lost)
    const offer = `${state}|${verdict?.change ? JSON.stringify(verdict.change) : ''}`;
    if (offer !== this._pauseOffer) {
      this._pauseOffer = offer;
      this._pause.replaceChildren(...pauseButtons(this.jobName, state, verdict, () => void this._poll.refresh()));
    }
  }

  private drawRanks(rows: IRankRow[]): void {
    this._ranks.replaceChildren();
    this._ranks.hidden = rows.length === 0;
    if (!rows.length) {
      return;
    }
    const gpu = rows.some(r => r.gpu_util !== null);
    const multi = new Set(rows.map(r => r.host).filter(Boolean)).size > 1;
    const timed = rows.some(r => r.step_s !== null);
    const head = ['rank', ...(multi ? ['host'] : []), ...(gpu ? ['GPU %', 'GPU MiB'] : []), 'CPU %', 'RSS MiB',
      ...(timed ? ['s/step', 'data', 'compute', 'exchange', 'other'] : [])];
    const tr = el('tr', '');
    head.forEach(h => tr.appendChild(el('th', '', h)));
    const thead = el('thead', '');
    thead.appendChild(tr);
    const body = el('tbody', '');
    for (const r of rows) {
      const cells = [String(r.rank), ...(multi ? [r.host ?? MISSING] : []),
        ...(gpu ? [fmt(r.gpu_util), `${fmt(r.gpu_mem_mb)} / ${fmt(r.gpu_mem_total_mb)}`] : []),
        fmt(r.cpu_percent), fmt(r.rss_mb),
        ...(timed ? [r.step_s === null ? MISSING : r.step_s.toPrecision(3), share(r.data), share(r.compute),
          share(r.exchange), share(r.other)] : [])];
      const row = el('tr', '');
      cells.forEach(c => row.appendChild(el('td', '', c)));
      body.appendChild(row);
    }
    this._ranks.append(thead, body);
    const ranks = rows.map(r => r.rank);
    if (ranks.join() !== this._knownRanks.join()) {
      this._knownRanks = ranks;
      this.setFilterOptions();
    }
  }

  private setFilterOptions(): void {
    const value = this._filter.value || 'all';
    const options: [string, string][] = [['all', 'all ranks'], ['launcher', 'launcher'],
      ...this._knownRanks.map(r => [String(r), `rank ${r}`] as [string, string])];
    this._filter.replaceChildren(...options.map(([v, label]) => {
      const o = el('option', '', label);
      o.value = v;
      return o;
    }));
    this._filter.value = options.some(([v]) => v === value) ? value : 'all';
  }

  private appendLog(lines: ILogLine[]): void {
    if (lines.length === 0) {
      return;
    }
    this._lines.push(...lines);
    if (this._lines.length > MAX_LOG_LINES) {
      this._lines.splice(0, this._lines.length - MAX_LOG_LINES);
    }
    this.drawLog();
  }

  private drawLog(): void {
    const stick = this._log.scrollTop + this._log.clientHeight >= this._log.scrollHeight - 4;
    const pick = this._filter.value || 'all';
    const errorsOnly = this._errorsOnly.checked;
    const shown = this._lines.filter(
      l =>
        (pick === 'all' || (pick === 'launcher' ? l.rank === null : String(l.rank) === pick)) &&
        (!errorsOnly || l.error)
    );
    this._log.replaceChildren(
      ...shown.map(l => {
        const line = el('div', l.error ? 'lanenb-log-line lanenb-log-error' : 'lanenb-log-line', l.text);
        line.dataset.rank = l.rank === null ? 'launcher' : String(l.rank);
        return line;
      })
    );
    this._logCount.textContent = `${shown.length} of ${this._lines.length} lines`;
    if (stick) {
      this._log.scrollTop = this._log.scrollHeight;
    }
  }

  private _cursor: string | null = null;
  private _final = false;
  private _state = '';
  private _run: IJobPanelState | null = null;
  private _reading: Promise<void> | null = null;
  private _chartsAt = 0;
  private _chartsOwed = false;
  private _chartsFinal = false;
  private _knownRanks: number[] = [];
  private readonly _lines: ILogLine[] = [];
  private readonly _chip: HTMLSpanElement;
  private readonly _status: HTMLDivElement;
  private readonly _progress: HTMLProgressElement;
  private readonly _eta: HTMLSpanElement;
  private readonly _headline: HTMLDivElement;
  private readonly _verdict: HTMLDivElement;
  private readonly _stop: HTMLButtonElement;
  private readonly _pause: HTMLSpanElement;
  private _pauseOffer = '';
  private readonly _grid: ChartGrid;
  private readonly _ranks: HTMLTableElement;
  private readonly _filter: HTMLSelectElement;
  private readonly _errorsOnly: HTMLInputElement;
  private readonly _logCount: HTMLSpanElement;
  private readonly _log: HTMLPreElement;
  private readonly _poll: Poll;
}
