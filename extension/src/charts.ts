// Small SVG charts: a sparkline for the jobs list, line charts for the job panel (drawn from
// the reduced state the panel's update stream carries).
import { IRunState, IStepSplit } from './api';

const SVG_NS = 'http://www.w3.org/2000/svg';

function svg(width: number, height: number, cls: string): SVGSVGElement {
  const el = document.createElementNS(SVG_NS, 'svg');
  el.setAttribute('width', String(width));
  el.setAttribute('height', String(height));
  el.setAttribute('viewBox', `0 0 ${width} ${height}`);
  el.setAttribute('class', cls);
  return el;
}

function path(points: [number, number][], cls: string): SVGPathElement {
  const el = document.createElementNS(SVG_NS, 'path');
  el.setAttribute(
    'd',
    points
      .map(([x, y], i) => `${i ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`)
      .join(' ')
  );
  el.setAttribute('class', cls);
  el.setAttribute('fill', 'none');
  return el;
}

/** Utilisation samples (0..100) as a sparkline; an empty box when there are none. */
export function sparkline(
  values: number[],
  width = 80,
  height = 18
): SVGSVGElement {
  const el = svg(width, height, 'lanenb-sparkline');
  if (values.length < 2) {
    return el;
  }
  const step = width / (values.length - 1);
  const pts: [number, number][] = values.map((v, i) => [
    i * step,
    height - 1 - (Math.max(0, Math.min(100, v)) / 100) * (height - 2)
  ]);
  el.appendChild(path(pts, 'lanenb-sparkline-line'));
  return el;
}

/** One series (x ascending) as a line chart with its min/max written at the left. */
export function lineChart(
  title: string,
  x: number[],
  y: number[],
  width = 300,
  height = 90
): HTMLElement {
  const box = document.createElement('div');
  box.className = 'lanenb-chart';
  const label = document.createElement('div');
  label.className = 'lanenb-chart-title';
  box.appendChild(label);
  const pts = x
    .map((xv, i) => [xv, y[i]] as [number, number])
    .filter(([, yv]) => typeof yv === 'number' && isFinite(yv));
  label.textContent =
    pts.length > 0
      ? `${title}: ${pts[pts.length - 1][1].toPrecision(4)} (${pts.length} points)`
      : `${title}: no data yet`;
  const el = svg(width, height, 'lanenb-chart-svg');
  box.appendChild(el);
  if (pts.length < 1) {
    return box;
  }
  const xs = pts.map(p => p[0]);
  const ys = pts.map(p => p[1]);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  const pad = 6;
  const sx = (v: number) =>
    pad + ((v - x0) / (x1 - x0 || 1)) * (width - 2 * pad);
  const sy = (v: number) =>
    height - pad - ((v - y0) / (y1 - y0 || 1)) * (height - 2 * pad);
  if (pts.length === 1) {
    const dot = document.createElementNS(SVG_NS, 'circle');
    dot.setAttribute('cx', String(width / 2));
    dot.setAttribute('cy', String(height / 2));
    dot.setAttribute('r', '3');
    dot.setAttribute('class', 'lanenb-chart-dot');
    el.appendChild(dot);
    return box;
  }
  el.appendChild(
    path(
      pts.map(([a, b]) => [sx(a), sy(b)]),
      'lanenb-chart-line'
    )
  );
  return box;
}

/** The job panel's charts from the job's reduced state: loss, images/s, val accuracy,
 * rank 0's utilisation (GPU when it has one, else CPU) and where each rank's step goes,
 * each when the run has it. */
export function runCharts(state: IRunState): HTMLElement[] {
  const charts: HTMLElement[] = [];
  const loss = state.series.loss;
  charts.push(lineChart('loss', loss?.x ?? [], loss?.y ?? []));
  const ips = state.series.images_per_s;
  if (ips) {
    charts.push(lineChart('images/s', ips.x, ips.y));
  }
  const val = state.epochs.val_accuracy;
  if (val) {
    charts.push(lineChart('val accuracy', val.x, val.y));
  }
  const rank0 = state.system['0'];
  const util = rank0?.gpu_util ?? rank0?.cpu_percent;
  if (util) {
    charts.push(
      lineChart(rank0.gpu_util ? 'GPU util % (rank 0)' : 'CPU % (rank 0)', util.x, util.y)
    );
  }
  if (state.breakdown && Object.keys(state.breakdown).length > 0) {
    const hosts: { [rank: string]: string | null | undefined } = {};
    for (const [rank, t] of Object.entries(state.timing ?? {})) {
      hosts[rank] = t.host;
    }
    charts.push(stepBars(state.breakdown, hosts));
  }
  return charts;
}

/** The parts of a step, in drawing order, with the colours lanenb.charts.png uses. */
export const STEP_PARTS: [keyof Omit<IStepSplit, 'step_s'>, string][] = [
  ['data', '#ef6c00'],
  ['compute', '#2e7d32'],
  ['exchange', '#c62828'],
  ['other', '#9e9e9e']
];

/** One horizontal stacked bar per rank (data / compute / exchange / other), each part's
 * share written on it when wide enough, seconds per step at the right; a legend below. */
export function stepBars(
  breakdown: { [rank: string]: IStepSplit },
  hosts: { [rank: string]: string | null | undefined } = {},
  width = 300
): HTMLElement {
  const box = document.createElement('div');
  box.className = 'lanenb-chart lanenb-step-bars';
  const title = document.createElement('div');
  title.className = 'lanenb-chart-title';
  title.textContent = 'where a step goes, per rank';
  box.appendChild(title);
  const ranks = Object.keys(breakdown).sort((a, b) => Number(a) - Number(b));
  const barH = 14;
  const gap = 6;
  const labelW = 48;
  const tailW = 56;
  const height = Math.max(1, ranks.length) * (barH + gap);
  const el = svg(width, height, 'lanenb-chart-svg');
  const span = width - labelW - tailW;
  ranks.forEach((rank, i) => {
    const split = breakdown[rank];
    const y = i * (barH + gap);
    const label = document.createElementNS(SVG_NS, 'text');
    label.setAttribute('x', '0');
    label.setAttribute('y', String(y + barH - 3));
    label.setAttribute('class', 'lanenb-bar-label');
    label.textContent = `rank ${rank}`;
    el.appendChild(label);
    let x = labelW;
    for (const [part, colour] of STEP_PARTS) {
      const w = Math.max(0, Math.min(1, split[part] ?? 0)) * span;
      const rect = document.createElementNS(SVG_NS, 'rect');
      rect.setAttribute('x', x.toFixed(1));
      rect.setAttribute('y', String(y));
      rect.setAttribute('width', w.toFixed(1));
      rect.setAttribute('height', String(barH));
      rect.setAttribute('fill', colour);
      rect.setAttribute('class', `lanenb-bar-${part}`);
      rect.dataset.share = String(split[part] ?? 0);
      const tip = document.createElementNS(SVG_NS, 'title');
      const host = hosts[rank] ? ` (${hosts[rank]})` : '';
      tip.textContent = `rank ${rank}${host}: ${part} ${Math.round((split[part] ?? 0) * 100)}%`;
      rect.appendChild(tip);
      el.appendChild(rect);
      if (w >= 26) {
        const text = document.createElementNS(SVG_NS, 'text');
        text.setAttribute('x', (x + w / 2).toFixed(1));
        text.setAttribute('y', String(y + barH - 3));
        text.setAttribute('text-anchor', 'middle');
        text.setAttribute('class', 'lanenb-bar-share');
        text.textContent = `${Math.round((split[part] ?? 0) * 100)}%`;
        el.appendChild(text);
      }
      x += w;
    }
    const secs = document.createElementNS(SVG_NS, 'text');
    secs.setAttribute('x', String(labelW + span + 4));
    secs.setAttribute('y', String(y + barH - 3));
    secs.setAttribute('class', 'lanenb-bar-label');
    secs.textContent = `${split.step_s.toPrecision(3)} s`;
    el.appendChild(secs);
  });
  box.appendChild(el);
  const legend = document.createElement('div');
  legend.className = 'lanenb-bar-legend';
  for (const [part, colour] of STEP_PARTS) {
    const item = document.createElement('span');
    item.style.setProperty('--lanenb-swatch', colour);
    item.textContent = part;
    legend.appendChild(item);
  }
  box.appendChild(legend);
  return box;
}
