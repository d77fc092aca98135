// Small SVG charts: a sparkline for the jobs list, line charts for the job panel (drawn from
// the reduced state the panel's update stream carries).
import { IRunState } from './api';

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

/** The job panel's charts from the job's reduced state: loss, images/s, val accuracy and
 * rank 0's utilisation (GPU when it has one, else CPU), each when the run has it. */
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
  return charts;
}
