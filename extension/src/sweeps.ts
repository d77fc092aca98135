// The sidebar's sweeps: one row a sweep (state chip, trials settled of the total, the best value
// of its objective, Stop while its driver runs). A click opens the sweep under its row: the
// trials table (state, the objective, epochs, the searched parameters, and under a pruned or
// failed trial why; the best trial starred) and the %lanesweep chart, one Vega-Lite part per
// chart, drawn by the job panel's renderer (vegacharts.ts) and fitted to the sidebar's width. An
// open sweep is read again while it runs or when its list row changes; only changed charts are
// re-drawn.

import { api, ISweepDetail, ISweepSummary, ITrialRow } from './api';
import { confirmThen } from './confirm';
import { el, fillName, MISSING, stateChip } from './dom';
import { ChartGrid, Spec } from './vegacharts';

const LIVE = new Set(['running', 'stopping']);
const AROUND_PLOT = 100; // px a part needs beside its plot: the y axis and its title, the frame
const MIN_PLOT = 100;
const WIDTH_STEP = 20; // plot widths come in steps, so a sidebar dragged wider re-draws seldom
const LEGEND_COLUMN = 64; // px a legend entry ("complete", "12") takes in a row under the plot

/** The parts at most as wide as the sidebar lets them be (the spec's own width at most), their
 * legends under the plot in as many columns as fit: a narrow sidebar shows whole charts, legends
 * included, instead of their left halves and a sideways scrollbar. */
export function fitted(specs: Spec[], available: number): Spec[] {
  const plot = Math.max(MIN_PLOT, Math.floor((available - AROUND_PLOT) / WIDTH_STEP) * WIDTH_STEP);
  const legend = {
    orient: 'bottom',
    direction: 'horizontal',
    columns: Math.max(1, Math.floor(plot / LEGEND_COLUMN)),
    labelLimit: LEGEND_COLUMN * 2,
    titleOrient: 'left'
  };
  return specs.map(spec => {
    const width = typeof spec.width === 'number' ? Math.min(spec.width, plot) : spec.width;
    const config = { ...(spec.config ?? {}), legend: { ...(spec.config?.legend ?? {}), ...legend } };
    return { ...spec, width, config };
  });
}

/** A number as the trials table of %lanesweep writes it (4 significant digits, Python's .4g). */
export function formatValue(value: unknown): string {
  if (value === null || value === undefined) {
    return MISSING;
  }
  if (typeof value === 'number') {
    return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(4)));
  }
  return String(value);
}

/** Ask, then stop the sweep: its driver cancels the running trials, finished ones stay. */
async function confirmStopSweep(name: string): Promise<boolean> {
  return confirmThen(
    {
      title: 'Stop sweep',
      body: `Stop sweep "${name}"? Its running trials are cancelled; finished trials are kept.`,
      failure: 'Could not stop the sweep'
    },
    () => api.stopSweep(name)
  );
}

/** One opened sweep: its settings line, trials table and charts. */
class SweepDetail {
  readonly node: HTMLDivElement;
  /** The list row the detail was last read for (a changed row is read again). */
  seen = '';

  constructor(readonly name: string) {
    this.node = el('div', 'lanenb-sweep-detail');
    this._settings = el('div', 'lanenb-sweep-settings');
    this._message = el('div', 'lanenb-sweep-message', 'loading…');
    this._table = el('table', 'lanenb-trials');
    const box = el('div', 'lanenb-trials-box');
    box.appendChild(this._table);
    this._grid = new ChartGrid();
    this.node.append(this._settings, this._message, box, this._grid.node);
    // the sidebar dragged wider or narrower: the charts follow (a chart of unchanged size stays)
    this._resize = new ResizeObserver(() => {
      // the why lines wrap at the width one sees, not at the (scrolling) table's
      this.node.style.setProperty('--lanenb-sweep-width', `${this.node.clientWidth}px`);
      this.drawCharts();
    });
    this._resize.observe(this.node);
  }

  get grid(): ChartGrid {
    return this._grid;
  }

  say(text: string): void {
    this._message.textContent = text;
    this._message.hidden = !text;
  }

  show(sweep: ISweepDetail): void {
    const s = sweep.settings;
    this._settings.textContent =
      `${s.sampler} + ${s.pruner} · ${s.objective.direction} ${sweep.objective?.label ?? ''} · ` +
      `${s.parallel} at once`;
    this.say(sweep.trials.length ? '' : 'No trial yet.');
    this.drawTrials(sweep);
    this._charts = sweep.trials.length ? sweep.charts : [];
    this.drawCharts();
  }

  dispose(): void {
    this._resize.disconnect();
    this._grid.dispose();
    this.node.remove();
  }

  private drawCharts(): void {
    const width = this.node.clientWidth; // 0 while hidden: drawn when shown, by the observer
    if (width === 0 || (width === this._drawn.width && this._charts === this._drawn.charts)) {
      return; // the observer also sees every change of height (a chart drawn, a row added)
    }
    this._drawn = { width, charts: this._charts };
    this._grid.setSpecs(fitted(this._charts, width));
  }

  private drawTrials(sweep: ISweepDetail): void {
    const best = sweep.best?.number;
    const objective = sweep.objective?.label ?? 'objective';
    const head = el('tr', '');
    // the objective before the parameters: what a narrow sidebar shows without scrolling
    const titles = ['trial', 'state', objective, 'epochs', ...sweep.params];
    for (const title of titles) {
      head.appendChild(el('th', '', title));
    }
    const thead = el('thead', '');
    thead.appendChild(head);
    const body = el('tbody', '');
    for (const t of sweep.trials) {
      body.appendChild(this.trialRow(t, sweep.params, t.number === best));
      if (t.why) {
        // on a row of its own under the trial: a sentence, readable in a narrow sidebar
        const why = el('tr', 'lanenb-trial-why-row');
        why.dataset.trial = String(t.number);
        const cell = el('td', 'lanenb-trial-why');
        cell.colSpan = titles.length;
        cell.appendChild(el('span', '', t.why));
        why.appendChild(cell);
        body.appendChild(why);
      }
    }
    this._table.replaceChildren(thead, body);
    this._table.hidden = sweep.trials.length === 0;
  }

  private trialRow(t: ITrialRow, params: string[], best: boolean): HTMLTableRowElement {
    const row = el('tr', best ? 'lanenb-trial lanenb-trial-best' : 'lanenb-trial');
    row.dataset.trial = String(t.number);
    row.title = t.job ? `job ${t.job}` : '';
    const number = el('td', 'lanenb-trial-number', `${t.number}${best ? ' ★' : ''}`);
    if (best) {
      number.title = 'the best finished trial';
    }
    const state = el('td', '');
    state.appendChild(stateChip(t.state));
    row.append(
      number,
      state,
      el('td', 'lanenb-trial-value', formatValue(t.value)),
      el('td', 'lanenb-trial-epochs', String(t.epochs)),
      ...params.map(p => el('td', 'lanenb-trial-param', formatValue(t.params[p])))
    );
    return row;
  }

  private readonly _settings: HTMLDivElement;
  private readonly _message: HTMLDivElement;
  private readonly _table: HTMLTableElement;
  private readonly _grid: ChartGrid;
  private readonly _resize: ResizeObserver;
  private _charts: Spec[] = [];
  private _drawn: { width: number; charts: Spec[] } = { width: 0, charts: [] };
}

/** The sweeps section of the sidebar. */
export class SweepList {
  readonly node: HTMLDivElement;

  /** `changed` asks the sidebar for a refresh (after a Stop). */
  constructor(private readonly changed: () => void) {
    this.node = el('div', 'lanenb-sweeps');
  }

  /** The opened sweep, if any (tests reach its charts through it). */
  get opened(): SweepDetail | null {
    return this._open;
  }

  render(sweeps: ISweepSummary[]): void {
    this.node.replaceChildren();
    if (sweeps.length === 0) {
      this.node.appendChild(el('div', 'lanenb-empty', 'No sweeps yet: run %lanesweep in a notebook.'));
    }
    const open = this._open;
    let stillThere: ISweepSummary | null = null;
    for (const sweep of sweeps) {
      const item = this.sweepRow(sweep);
      if (open && open.name === sweep.name) {
        stillThere = sweep;
        item.appendChild(open.node);
      }
      this.node.appendChild(item);
    }
    if (open && !stillThere) {
      this.close();
    } else if (open && stillThere && (LIVE.has(stillThere.state) || open.seen !== JSON.stringify(stillThere))) {
      void this.load(open, stillThere);
    }
  }

  dispose(): void {
    this.close();
  }

  /** Two short lines: chip, name, Stop / trials settled of the total, the best value. */
  private sweepRow(sweep: ISweepSummary): HTMLDivElement {
    const item = el('div', `lanenb-sweep lanenb-state-${sweep.state}`);
    item.dataset.sweep = sweep.name;
    item.title = sweep.error || `sweep ${sweep.name}: ${sweep.state}`;
    const top = el('div', 'lanenb-job-row');
    const name = el('button', 'lanenb-job-name lanenb-sweep-name');
    const isOpen = this._open?.name === sweep.name;
    fillName(name, sweep.name, `${sweep.name}\n${isOpen ? 'close' : 'open'} the sweep (trials table and chart)`);
    name.setAttribute('aria-expanded', String(isOpen));
    name.onclick = () => this.toggle(sweep);
    top.append(stateChip(sweep.state), name);
    if (LIVE.has(sweep.state)) {
      const stop = el('button', 'lanenb-stop jp-mod-styled jp-mod-warn', 'Stop');
      stop.title = `stop sweep ${sweep.name} and its running trials`;
      stop.disabled = sweep.state === 'stopping';
      stop.onclick = async () => {
        if (await confirmStopSweep(sweep.name)) {
          this.changed();
        }
      };
      top.appendChild(stop);
    }
    const bottom = el('div', 'lanenb-job-row lanenb-sweep-meta');
    if (sweep.error) {
      bottom.appendChild(el('span', 'lanenb-sweep-message', sweep.error));
    } else {
      const running = sweep.trials_running ? ` · ${sweep.trials_running} running` : '';
      bottom.appendChild(
        el('span', 'lanenb-sweep-trials', `${sweep.trials_done}/${sweep.trials_total} trials${running}`)
      );
      const best = el('span', 'lanenb-sweep-best');
      if (sweep.best) {
        best.append(
          el('span', 'lanenb-acc-value', formatValue(sweep.best.value)),
          el('span', 'lanenb-acc-label', ` best ${sweep.best.objective} · trial ${sweep.best.number}`)
        );
        best.title = `${sweep.best.job ?? ''} ${JSON.stringify(sweep.best.params)}`;
      } else {
        best.append(el('span', 'lanenb-acc-label', 'no finished trial yet'));
      }
      bottom.appendChild(best);
    }
    item.append(top, bottom);
    return item;
  }

  private toggle(sweep: ISweepSummary): void {
    const wasOpen = this._open?.name === sweep.name;
    this.close();
    const item = this.node.querySelector<HTMLElement>(`.lanenb-sweep[data-sweep="${CSS.escape(sweep.name)}"]`);
    item?.querySelector('.lanenb-sweep-name')?.setAttribute('aria-expanded', String(!wasOpen));
    if (wasOpen || !item) {
      return;
    }
    const detail = new SweepDetail(sweep.name);
    this._open = detail;
    item.appendChild(detail.node);
    void this.load(detail, sweep);
  }

  private close(): void {
    this._open?.dispose();
    this._open = null;
  }

  /** Read the opened sweep (one read at a time; a newer list row waits for the next poll). */
  private async load(detail: SweepDetail, row: ISweepSummary): Promise<void> {
    if (this._loading) {
      return;
    }
    this._loading = true;
    try {
      const sweep = await api.sweep(detail.name);
      if (this._open === detail) {
        detail.seen = JSON.stringify(row);
        detail.show(sweep);
      }
    } catch (err) {
      if (this._open === detail) {
        detail.say(`Could not read sweep ${detail.name}: ${(err as Error).message}`);
      }
    } finally {
      this._loading = false;
    }
  }

  private _open: SweepDetail | null = null;
  private _loading = false;
}
