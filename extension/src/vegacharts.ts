// Live Vega-Lite charts: the one renderer of a run's panels for the notebook's LiveCharts
// widget and the sidebar's job panel. The specs come from Python (lanenb/charts/specs.py) with
// named datasets and no values; rows (lanenb/analysis/chartdata.py) carry a key `k`, so a new
// set of rows becomes a Vega change set (remove the changed and vanished keys, insert the new
// ones) instead of a re-drawn chart: hover, zoom and legend toggles survive every update.
// Zoom (Ctrl/Cmd + wheel in the specs, so a plain wheel scrolls the page) and pan stay inside the
// data's own range: `clampZoom` wraps Vega-Lite's zoom and pan updates in clampRange over the
// extent of the rows held, so a chart never zooms out to -20,000 s.
import embed, { Result, VisualizationSpec } from 'vega-embed';
import { changeset } from 'vega';

/** One chart row; `k` identifies it across updates. */
export interface IRow {
  k: string;
  [field: string]: unknown;
}

export type Rows = { [dataset: string]: IRow[] };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Spec = { [key: string]: any };

interface ILanenbMeta {
  panel?: string;
  log_axis?: string;
}

function meta(spec: Spec): ILanenbMeta {
  return (spec.usermeta && spec.usermeta.lanenb) || {};
}

/** The dataset names a spec reads (`{"data": {"name": ...}}` anywhere in it). */
export function datasetNames(spec: unknown, out: Set<string> = new Set()): Set<string> {
  if (Array.isArray(spec)) {
    spec.forEach(s => datasetNames(s, out));
  } else if (spec && typeof spec === 'object') {
    const obj = spec as Spec;
    if (obj.data && typeof obj.data.name === 'string') {
      out.add(obj.data.name);
    }
    Object.values(obj).forEach(v => datasetNames(v, out));
  }
  return out;
}

/** A copy of `spec` whose axis titled `title` uses a log (or linear) scale. */
export function withLogAxis(spec: Spec, title: string, log: boolean): Spec {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) {
      return node.map(walk);
    }
    if (node && typeof node === 'object') {
      const obj: Spec = {};
      for (const [key, value] of Object.entries(node as Spec)) {
        obj[key] = walk(value);
      }
      if (obj.title === title && obj.scale && typeof obj.scale === 'object') {
        obj.scale = { ...obj.scale, type: log ? 'log' : 'linear' };
      }
      return obj;
    }
    return node;
  };
  return walk(spec) as Spec;
}

/** A zoom bound to an x scale: the Vega signal holding its domain, the field it zooms, and the
 * signal (added by clampZoom) holding that field's extent over the rows. */
interface IZoom {
  signal: string;
  field: string;
  extent: string;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type VgSpec = { signals?: any[]; [key: string]: any };

/** Vega-Lite's scale-bound interval params ("bind": "scales") as compiled: a signal `<param>_<field>`
 * updated by zoomLinear (wheel) and panLinear (drag). Each update is wrapped in clampRange over a
 * new `<signal>_extent` signal (the data's [min, max], set by the chart from its rows): zoomed out,
 * the chart stops at its data; panned, it stops at either end. The zooms found go to `found`. */
export function clampZoom(vg: VgSpec, found: IZoom[]): VgSpec {
  const signals = vg.signals ?? [];
  const byName = new Map(signals.map(sig => [sig.name as string, sig]));
  for (const sig of signals) {
    const name = String(sig.name ?? '');
    if (!name.endsWith('_tuple_fields') || !Array.isArray(sig.value)) {
      continue;
    }
    const param = name.slice(0, -'_tuple_fields'.length);
    for (const f of sig.value) {
      const zoom = byName.get(`${param}_${f.field}`);
      const ranged = f.type === 'R' && zoom && Array.isArray(zoom.on);
      if (!ranged || !zoom.on.some((h: { update?: string }) => /zoomLinear|panLinear/.test(h.update ?? ''))) {
        continue;
      }
      const extent = `${zoom.name}_extent`;
      signals.push({ name: extent, value: null });
      for (const handler of zoom.on) {
        if (/zoomLinear|panLinear/.test(handler.update ?? '')) {
          handler.update = `${extent} ? clampRange(${handler.update}, ${extent}[0], ${extent}[1]) : ${handler.update}`;
        }
      }
      found.push({ signal: zoom.name, field: String(f.field), extent });
    }
  }
  vg.signals = signals;
  return vg;
}

function darkTheme(): boolean {
  return document.body.dataset.jpThemeLight === 'false';
}

/** Whether two rows of one key hold the same values (rows are flat: numbers, strings, null).
 * Field by field rather than through JSON.stringify: an update compares every row a dataset
 * holds, and strings for each would be garbage the next frames pay for. */
function sameRow(a: IRow, b: IRow): boolean {
  const keys = Object.keys(b);
  if (keys.length !== Object.keys(a).length) {
    return false;
  }
  for (const key of keys) {
    const x = (a as Record<string, unknown>)[key];
    const y = (b as Record<string, unknown>)[key];
    if (x !== y && (typeof x !== 'object' || JSON.stringify(x) !== JSON.stringify(y))) {
      return false;
    }
  }
  return true;
}

/** One panel: a Vega view fed by keyed rows, with a log-scale switch where the spec asks. */
export class LiveChart {
  readonly node: HTMLDivElement;
  readonly panel: string;

  constructor(readonly spec: Spec) {
    this.panel = meta(spec).panel || 'chart';
    this.node = document.createElement('div');
    this.node.className = 'lanenb-vchart';
    this.node.dataset.panel = this.panel;
    const logAxis = meta(spec).log_axis;
    if (logAxis) {
      const label = document.createElement('label');
      label.className = 'lanenb-vchart-log';
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.setAttribute('aria-label', `log scale for ${logAxis}`);
      box.onchange = () => {
        this._log = box.checked;
        void this.draw();
      };
      label.append(box, ` log ${logAxis}`);
      this.node.appendChild(label);
    }
    this._host = document.createElement('div');
    this._host.className = 'lanenb-vchart-view';
    this.node.appendChild(this._host);
    this._names = datasetNames(spec);
    // JupyterLab's theme switch (Settings > Theme) re-draws the chart in Vega's matching theme
    this._themeWatch = new MutationObserver(() => {
      if (this.node.dataset.theme !== (darkTheme() ? 'dark' : 'light')) {
        void this.draw();
      }
    });
    this._themeWatch.observe(document.body, { attributes: true, attributeFilter: ['data-jp-theme-light'] });
  }

  /** Whether `spec` is the spec this chart draws (the grid keeps charts whose spec is unchanged). */
  sameSpec(spec: Spec): boolean {
    return JSON.stringify(spec) === JSON.stringify(this.spec);
  }

  /** The Vega view once drawn (tests and benchmarks read its signals). */
  get view(): Result['view'] | null {
    return this._result ? this._result.view : null;
  }

  /** Draw (or re-draw after a log switch) and put the rows held so far in. */
  async draw(): Promise<void> {
    const ticket = ++this._drawn;
    this.node.dataset.ready = 'false';
    const logAxis = meta(this.spec).log_axis;
    const spec = logAxis && this._log ? withLogAxis(this.spec, logAxis, true) : this.spec;
    const dark = darkTheme();
    this.node.dataset.theme = dark ? 'dark' : 'light';
    const zooms: IZoom[] = [];
    const result = await embed(this._host, spec as VisualizationSpec, {
      actions: false,
      renderer: 'svg',
      ...(dark ? { theme: 'dark' } : {}),
      config: { background: 'transparent' },
      patch: (vg: VgSpec) => clampZoom(vg, zooms)
    });
    if (ticket !== this._drawn) {
      result.finalize(); // a newer draw started meanwhile
      return;
    }
    this._result?.finalize();
    this._result = result;
    this._zooms = zooms;
    this._extents.clear();
    for (const name of this._names) {
      const rows = Array.from(this._rows.get(name)?.values() ?? []);
      if (rows.length) {
        result.view.change(name, changeset().insert(rows));
      }
    }
    this.setExtents();
    await result.view.runAsync();
    this.node.dataset.ready = 'true';
  }

  /** Bring dataset `name` to `rows`: only changed, new and vanished rows touch the view. */
  setRows(name: string, rows: IRow[]): boolean {
    if (!this._names.has(name)) {
      return false;
    }
    const held = this._rows.get(name) ?? new Map<string, IRow>();
    const next = new Map<string, IRow>();
    const inserts: IRow[] = [];
    const removes = new Set<string>();
    for (const row of rows) {
      const old = held.get(row.k);
      if (!old || !sameRow(old, row)) {
        inserts.push(row);
        if (old) {
          removes.add(row.k);
        }
      }
      next.set(row.k, row);
    }
    for (const k of held.keys()) {
      if (!next.has(k)) {
        removes.add(k);
      }
    }
    this._rows.set(name, next);
    if (!this._result || (!inserts.length && !removes.size)) {
      return inserts.length > 0 || removes.size > 0;
    }
    const change = changeset()
      .remove((d: IRow) => removes.has(d.k))
      .insert(inserts);
    this._result.view.change(name, change);
    this._dirty = true;
    return true;
  }

  /** Run the view once after a batch of `setRows`. Each run is a `lanenb-chart-run` performance
   * measure (detail: the panel), so a profile or bench/notebook_view.py can tell which panel
   * costs a frame. */
  async flush(): Promise<void> {
    if (this._result && this._dirty) {
      this._dirty = false;
      this.setExtents();
      const start = performance.now();
      await this._result.view.runAsync();
      performance.measure('lanenb-chart-run', { start, detail: this.panel });
    }
  }

  /** Each zoom's bounds: the extent of its field over every row held (a span of zero: none). */
  private setExtents(): void {
    if (!this._result) {
      return;
    }
    for (const zoom of this._zooms) {
      let lo = Infinity;
      let hi = -Infinity;
      for (const rows of this._rows.values()) {
        for (const row of rows.values()) {
          const v = row[zoom.field];
          if (typeof v === 'number' && Number.isFinite(v)) {
            lo = Math.min(lo, v);
            hi = Math.max(hi, v);
          }
        }
      }
      const extent = hi > lo ? [lo, hi] : null;
      const key = extent ? extent.join() : '';
      if (this._extents.get(zoom.extent) !== key) {
        this._extents.set(zoom.extent, key);
        this._result.view.signal(zoom.extent, extent);
      }
    }
  }

  dispose(): void {
    this._drawn++;
    this._themeWatch.disconnect();
    this._result?.finalize();
    this._result = null;
    this.node.remove();
  }

  private _log = false;
  private _drawn = 0;
  private _dirty = false;
  private _result: Result | null = null;
  private _zooms: IZoom[] = [];
  private readonly _extents = new Map<string, string>();
  private readonly _host: HTMLDivElement;
  private readonly _themeWatch: MutationObserver;
  private readonly _names: Set<string>;
  private readonly _rows = new Map<string, Map<string, IRow>>();
}

/** A run's panels side by side (they wrap to the width they get). */
export class ChartGrid {
  readonly node: HTMLDivElement;

  constructor() {
    this.node = document.createElement('div');
    this.node.className = 'lanenb-vcharts';
  }

  get charts(): LiveChart[] {
    return this._charts;
  }

  /** Show these panels, keeping (with their rows, zoom and toggles) those whose spec is unchanged. */
  setSpecs(specs: Spec[]): void {
    const next: LiveChart[] = [];
    for (const spec of specs) {
      const kept = this._charts.find(c => c.sameSpec(spec));
      const chart = kept ?? new LiveChart(spec);
      if (!kept) {
        for (const [name, rows] of Object.entries(this._rows)) {
          chart.setRows(name, rows);
        }
        void chart.draw();
      }
      next.push(chart);
    }
    for (const chart of this._charts) {
      if (!next.includes(chart)) {
        chart.dispose();
      }
    }
    this._charts = next;
    this.node.replaceChildren(...next.map(c => c.node));
  }

  /** New rows for some datasets (the others stay as they are). Each changed chart is run in
   * an animation frame of its own, so an update costs a frame at most one chart's work. */
  async setData(rows: Rows): Promise<void> {
    this._rows = { ...this._rows, ...rows };
    const touched = this._charts.filter(chart =>
      Object.entries(rows)
        .map(([name, r]) => chart.setRows(name, r))
        .some(Boolean)
    );
    for (const chart of touched) {
      await new Promise<void>(resolve => requestAnimationFrame(() => resolve()));
      await chart.flush();
    }
  }

  dispose(): void {
    this._charts.forEach(c => c.dispose());
    this._charts = [];
  }

  private _charts: LiveChart[] = [];
  private _rows: Rows = {};
}
