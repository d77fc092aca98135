// Small DOM helpers shared by the sidebar and the job panel: elements, state chips, names cut in
// the middle. Durations, sizes, relative dates and the missing mark are formats.ts's (generated
// from lanenb/charts/formats.py, the rules the Python faces use), re-exported here.
import { nameTail } from './formats';

export { formatBytes, formatDuration, formatMiB, formatPercent, MISSING, relativeTime } from './formats';

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** ``text`` as nodes that wrap at spaces only: a browser also breaks a line after a hyphen, which
 *  would split "--num-workers" or "input-bound:" over two lines, so each word holding one is a
 *  span that does not wrap (lanenb-word). The text reads and copies the same. */
export function wholeWords(text: string): Node[] {
  return text
    .split(/(\s+)/)
    .filter(part => part !== '')
    .map(part => (part.includes('-') ? el('span', 'lanenb-word', part) : document.createTextNode(part)));
}

/** A coloured chip naming a job state (colours follow the JupyterLab theme's variables). */
export function stateChip(state: string): HTMLSpanElement {
  const chip = el('span', 'lanenb-chip', state || '…');
  chip.dataset.state = state;
  return chip;
}

/** The 0-based epoch index of the events as people count it: "epoch 7", or "epoch 7/10" with the
 *  run's epochs (an index past the last reads as the last); "epoch ?" when unknown. The twin of
 *  lanenb_trainer.epochs.epoch_text: every epoch a person reads counts from 1, as the charts do. */
export function epochText(epoch: number | null | undefined, epochs?: number | null): string {
  const known = (n: number | null | undefined): n is number => typeof n === 'number' && Number.isInteger(n) && n >= 0;
  if (!known(epoch)) {
    return known(epochs) && epochs > 0 ? `epoch ?/${epochs}` : 'epoch ?';
  }
  const total = known(epochs) && epochs > 0 ? epochs : null;
  const index = total === null ? epoch : Math.min(epoch, total - 1);
  return `epoch ${index + 1}` + (total === null ? '' : `/${total}`);
}

/** A name that fits its box by losing its middle ("lane-2026…-trial-3"), not its end: two spans,
 *  the start (cut by an ellipsis where the box is too narrow) and the distinctive end (nameTail:
 *  from a hyphen among the last characters, never cut), so three sweep trials never look alike.
 *  The text reads and copies whole; `title` (the tooltip) names the whole name. */
export function fillName(node: HTMLElement, name: string, title: string = name): void {
  const tail = nameTail(name);
  node.classList.add('lanenb-name');
  node.replaceChildren(
    el('span', 'lanenb-name-head', name.slice(0, name.length - tail.length)),
    el('span', 'lanenb-name-tail', tail)
  );
  node.dataset.name = name;
  node.title = title;
}
