// The jobs list's utilisation sparkline: the latest samples of one rank on a fixed 0-100%
// scale (drawn as a framed box with a mid line, so two rows compare at a glance), its last
// value written beside it. The run charts themselves are Vega-Lite (vegacharts.ts).
import { MISSING } from './formats';

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Utilisation samples (0..100) as a sparkline with its scale; an empty frame when there are none. */
export function sparkline(values: number[], label: string, width = 72, height = 18): HTMLSpanElement {
  const box = document.createElement('span');
  box.className = 'lanenb-spark';
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(height));
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('class', 'lanenb-sparkline');
  svg.setAttribute('role', 'img');
  const y = (v: number) => height - 1 - (Math.max(0, Math.min(100, v)) / 100) * (height - 2);
  const mid = document.createElementNS(SVG_NS, 'line');
  mid.setAttribute('x1', '0');
  mid.setAttribute('x2', String(width));
  mid.setAttribute('y1', String(y(50)));
  mid.setAttribute('y2', String(y(50)));
  mid.setAttribute('class', 'lanenb-sparkline-mid');
  svg.appendChild(mid);
  if (values.length >= 2) {
    const step = width / (values.length - 1);
    const d = values.map((v, i) => `${i ? 'L' : 'M'}${(i * step).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    const path = document.createElementNS(SVG_NS, 'path');
    path.setAttribute('d', d);
    path.setAttribute('fill', 'none');
    path.setAttribute('class', 'lanenb-sparkline-line');
    svg.appendChild(path);
  }
  const last = values.length ? values[values.length - 1] : null;
  const text = `${label} ${last === null ? MISSING : Math.round(last) + '%'}`;
  svg.setAttribute('aria-label', `${label} utilisation, scale 0 to 100%, last ${last === null ? 'none' : Math.round(last) + '%'}`);
  const title = document.createElementNS(SVG_NS, 'title');
  title.textContent = `${label} utilisation of the lowest rank, last ${values.length} samples (scale 0–100%; mid line 50%)`;
  svg.appendChild(title);
  const value = document.createElement('span');
  value.className = 'lanenb-spark-value';
  value.textContent = text;
  box.append(svg, value);
  return box;
}
