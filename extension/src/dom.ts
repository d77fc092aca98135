// Small DOM helpers shared by the sidebar and the job panel: elements, state chips, durations,
// relative dates and sizes as people read them.

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

/** 75 -> "1m 15s", 5400 -> "1h 30m" (the notebook's format_duration). */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) {
    return `${s}s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)}m ${s % 60}s`;
  }
  if (s < 86400) {
    return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  }
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
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

/** Seconds since the epoch as "just now", "5 min ago", "3 h ago", "2 days ago". */
export function relativeTime(epochSeconds: number, now: number = Date.now() / 1000): string {
  const d = Math.max(0, now - epochSeconds);
  if (d < 45) {
    return 'just now';
  }
  if (d < 3600) {
    return `${Math.round(d / 60)} min ago`;
  }
  if (d < 86400) {
    return `${Math.round(d / 3600)} h ago`;
  }
  const days = Math.round(d / 86400);
  return `${days} day${days === 1 ? '' : 's'} ago`;
}

/** Bytes as "812 B", "4.2 MB", "1.3 GB" (decimal units, as file browsers show). */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) {
    return '–';
  }
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let v = bytes;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}
