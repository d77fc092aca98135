// The "Lane training" sidebar: a jobs table that reads at a glance (state chip, progress with
// ETA, the headline with its model label, a utilisation sparkline with its scale, Stop, Suspend /
// Resume / Apply (pause.ts), the
// doctor's verdict), the sweeps (sweeps.ts: a click opens the trials table and chart) and the
// snapshots grouped by run (short ids, sizes, relative dates; pick
// two to diff, Restore one into a new directory). Refreshed by two Polls that stand by while the
// sidebar is hidden: the jobs every 250 ms while one runs (a row is within 2 s of the job's log, as
// the notebook's live view is), every second otherwise, the sweeps and snapshots every few seconds, each drawn as soon as
// it arrives (a slow snapshot store never holds the jobs back). Only a job row whose data changed
// is drawn again, and none while a button is being pressed, so a click is never lost. Every control is a button or checkbox, so the keyboard reaches it.
import { Dialog, InputDialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { api, IJobSummary, ISnapshot, ISnapshotDiff } from './api';
import { confirmThen } from './confirm';
import { sparkline } from './charts';
import { el, fillName, formatBytes, formatDuration, formatPercent, relativeTime, stateChip, wholeWords } from './dom';
import { LIVE, STOPPABLE } from './formats';
import { pauseButtons } from './pause';
import { SweepList } from './sweeps';
import { TeamSection } from './team';

const SHORT_ID = 8;
// the jobs list: the server reads it again at most once a second for every sidebar, and answers
// with its latest reading meanwhile (lanenb/server/api.py LIST_TTL_S), so a row is behind the log
// by up to 1 s + 2 intervals + a reading: while a job runs the list is asked for every 250 ms (a
// row within 2 s of the log, as the notebook's live view), otherwise every second (a job's
// state changing makes the server read the list at once)
const LIVE_EVERY_MS = 250;
const IDLE_EVERY_MS = 1000;
// a press holds the rows still this long at most: a release the page never saw cannot freeze them
const PRESS_HOLD_MS = 2000;
const OTHERS_EVERY_MS = 3000; // sweeps and snapshots: a restic listing may take a second itself

/** Ask, then stop: the dialog names the job, the request repeats its name. */
export async function confirmStop(name: string): Promise<boolean> {
  return confirmThen(
    {
      title: 'Stop training job',
      body: `Stop job "${name}"? Its ranks get SIGTERM; it will show as cancelled everywhere.`,
      failure: 'Could not stop the job'
    },
    () => api.stop(name)
  );
}

/** The diff of two snapshots as a table of changed paths (the dialog's body). */
function diffBody(diff: ISnapshotDiff): HTMLElement {
  const box = el('div', 'lanenb-diff');
  box.appendChild(el('div', 'lanenb-diff-summary', diff.summary));
  const table = el('table', 'lanenb-diff-table');
  for (const change of diff.changes.slice(0, 200)) {
    const row = el('tr', `lanenb-diff-${change.change}`);
    const size = change.change === 'removed' ? change.size_before : change.size_after;
    row.append(
      el('td', 'lanenb-diff-kind', change.change),
      el('td', 'lanenb-diff-path', change.path),
      el('td', 'lanenb-diff-size', formatBytes(size))
    );
    table.appendChild(row);
  }
  box.appendChild(table);
  if (diff.changes.length > 200) {
    box.appendChild(el('div', 'lanenb-message', `… and ${diff.changes.length - 200} more`));
  }
  return box;
}

export class LaneSidebar extends Widget {
  constructor(private readonly openJob: (name: string) => void) {
    super();
    this.id = 'lanenb-sidebar';
    this.addClass('lanenb-sidebar');
    this.title.caption = 'Lane training';
    const header = el('div', 'lanenb-sidebar-header', 'Lane training');
    this._jobs = el('div', 'lanenb-jobs');
    this._jobs.addEventListener('pointerdown', () => (this._pressedAt = Date.now()));
    // caught on the way down (capture), so a widget that stops the event (Lumino's dock panel
    // taking the focus for the panel a click opens) cannot leave the list frozen
    const released = () => (this._pressedAt = 0);
    window.addEventListener('pointerup', released, true);
    window.addEventListener('pointercancel', released, true);
    this._released = released;
    this._sweeps = new SweepList(() => void this.refreshNow());
    this._team = new TeamSection();
    this._snaps = el('div', 'lanenb-snapshots');
    this._message = el('div', 'lanenb-message');
    this._message.setAttribute('role', 'status');
    this._diff = el('button', 'lanenb-diff-button jp-mod-styled', 'Diff');
    this._diff.disabled = true;
    this._diff.title = 'tick two snapshots to compare their files';
    this._diff.onclick = () => this.diffPicked();
    const snapHead = el('h3', 'lanenb-section');
    snapHead.append(el('span', '', 'Snapshots'), this._diff);
    this.node.append(
      header,
      this._message,
      el('h3', 'lanenb-section', 'Jobs'),
      this._jobs,
      el('h3', 'lanenb-section', 'Sweeps'),
      this._sweeps.node,
      this._team.node,
      snapHead,
      this._snaps
    );
    this._poll = new Poll({
      auto: true,
      factory: () => this.refreshJobs(),
      frequency: { interval: IDLE_EVERY_MS, backoff: true, max: 30000 },
      name: 'lanenb:sidebar',
      standby: 'when-hidden'
    });
    this._others = new Poll({
      auto: true,
      factory: () => this.refreshOthers(),
      frequency: { interval: OTHERS_EVERY_MS, backoff: true, max: 30000 },
      name: 'lanenb:sidebar-sweeps-snapshots',
      standby: 'when-hidden'
    });
  }

  dispose(): void {
    window.removeEventListener('pointerup', this._released, true);
    window.removeEventListener('pointercancel', this._released, true);
    this._poll.dispose();
    this._others.dispose();
    this._sweeps.dispose();
    this._team.dispose();
    super.dispose();
  }

  /** Ask for an immediate refresh (after Stop or Restore). */
  async refreshNow(): Promise<void> {
    await Promise.all([this._poll.refresh(), this._others.refresh()]);
  }

  /** Read everything once (each part drawn as soon as it arrives). */
  async refresh(): Promise<void> {
    await Promise.all([this.refreshJobs(), this.refreshOthers()]);
  }

  private async refreshJobs(): Promise<void> {
    await this.guarded(async () => {
      const { jobs } = await api.jobs();
      this.renderJobs(jobs);
      const interval = jobs.some(job => LIVE.has(job.state)) ? LIVE_EVERY_MS : IDLE_EVERY_MS;
      if (this._poll.frequency.interval !== interval) {
        this._poll.frequency = { ...this._poll.frequency, interval };
      }
    });
  }

  private async refreshOthers(): Promise<void> {
    await Promise.all([
      this.guarded(async () => this._sweeps.render((await api.sweeps()).sweeps)),
      this.guarded(async () => this.renderSnapshots((await api.snapshots()).snapshots))
    ]);
  }

  /** Run one read: an error is said above the lists (and the poll backs off), a success clears it. */
  private async guarded(read: () => Promise<void>): Promise<void> {
    try {
      await read();
      if (this._message.dataset.kind === 'error') {
        this._message.textContent = '';
        this._message.dataset.kind = '';
      }
    } catch (err) {
      this.say(`lanenb: ${(err as Error).message}`, 'error');
      throw err; // the poll backs off
    }
  }

  private say(text: string, kind = 'info'): void {
    this._message.textContent = text;
    this._message.dataset.kind = kind;
  }

  private renderJobs(jobs: IJobSummary[]): void {
    if (this._pressedAt && Date.now() - this._pressedAt < PRESS_HOLD_MS) {
      return; // the next poll draws them: a row replaced under the pointer would lose the click
    }
    if (jobs.length === 0) {
      this._rows.clear();
      this._jobs.replaceChildren(el('div', 'lanenb-empty', 'No jobs yet: run %lanetrain in a notebook.'));
      return;
    }
    const rows = new Map<string, { key: string; node: HTMLDivElement }>();
    for (const job of jobs) {
      const key = JSON.stringify(job);
      const held = this._rows.get(job.name);
      rows.set(job.name, held && held.key === key ? held : { key, node: this.jobRow(job) });
    }
    this._rows = rows;
    const nodes = [...rows.values()].map(r => r.node);
    const same = nodes.length === this._jobs.children.length && nodes.every((n, i) => this._jobs.children[i] === n);
    if (!same) {
      this._jobs.replaceChildren(...nodes);
    }
  }

  /** Three short lines: chip, name, Stop / progress with ETA, headline / sparkline, verdict; the
   *  headline and the verdict take a line of their own where they do not fit (lanenb-job-wraps). */
  private jobRow(job: IJobSummary): HTMLDivElement {
    const item = el('div', `lanenb-job lanenb-state-${job.state}`);
    item.dataset.job = job.name;
    item.title = job.error || job.summary || job.state;
    const top = el('div', 'lanenb-job-row');
    const name = el('button', 'lanenb-job-name');
    fillName(name, job.name, `${job.name}\nopen the job (charts, ranks, log)`);
    name.onclick = () => this.openJob(job.name);
    top.append(stateChip(job.state), name);
    // the buttons get a line of their own: beside the name they left it a letter wide
    const actions = el('div', 'lanenb-job-row lanenb-job-actions');
    if (STOPPABLE.has(job.state)) {
      const stop = el('button', 'lanenb-stop jp-mod-styled jp-mod-warn', 'Stop');
      stop.title = `stop job ${job.name}`;
      stop.onclick = async () => {
        if (await confirmStop(job.name)) {
          void this.refreshNow();
        }
      };
      actions.appendChild(stop);
    }
    actions.append(...pauseButtons(job.name, job.state, job.verdict, () => void this.refreshNow()));
    const middle = el('div', 'lanenb-job-row lanenb-job-wraps');
    const bar = el('progress', 'lanenb-job-progress');
    bar.max = 1;
    bar.value = job.progress ?? (job.final && job.state === 'succeeded' ? 1 : 0);
    const eta = job.eta_s !== null && job.eta_s !== undefined ? ` · ETA ${formatDuration(job.eta_s)}` : '';
    const acc = el('span', 'lanenb-job-accuracy');
    if (job.headline && job.headline.accuracy !== null) {
      acc.append(
        el('span', 'lanenb-acc-value', job.headline.accuracy.toFixed(3)),
        el('span', 'lanenb-acc-label', ` ${job.headline.split} · ${job.headline.label}`)
      );
      acc.title = job.headline.text;
    } else {
      acc.append(el('span', 'lanenb-acc-label', 'no accuracy yet'));
    }
    middle.append(bar, el('span', 'lanenb-job-percent', `${formatPercent(job.progress)}${eta}`), acc);
    const bottom = el('div', 'lanenb-job-row lanenb-job-wraps');
    const util = job.utilisation;
    bottom.appendChild(sparkline(util.values, util.metric === 'gpu_util' ? 'GPU' : 'CPU'));
    if (job.verdict) {
      const verdict = el('span', 'lanenb-verdict lanenb-job-verdict');
      verdict.append(...wholeWords(job.verdict.line));
      verdict.dataset.kind = job.verdict.kind;
      verdict.title = job.verdict.line;
      bottom.appendChild(verdict);
    }
    item.append(top, ...(actions.childElementCount ? [actions] : []), middle, bottom);
    return item;
  }

  private renderSnapshots(snapshots: ISnapshot[]): void {
    this._snaps.replaceChildren();
    const known = new Set(snapshots.map(s => s.id));
    this._picked = this._picked.filter(id => known.has(id));
    this.updateDiffButton();
    if (snapshots.length === 0) {
      const hint = el('div', 'lanenb-empty');
      hint.append(...wholeWords('No snapshots yet: train with --snapshot.'));
      this._snaps.appendChild(hint);
      return;
    }
    // grouped by the run that made them (newest group first), newest snapshot first in a group
    const groups = new Map<string, ISnapshot[]>();
    for (const snap of [...snapshots].sort((a, b) => b.created - a.created)) {
      const key = snap.job ?? '';
      groups.set(key, [...(groups.get(key) ?? []), snap]);
    }
    for (const [job, snaps] of groups) {
      const group = el('div', 'lanenb-snap-group');
      group.dataset.job = job;
      group.appendChild(el('div', 'lanenb-snap-group-title', job ? `run ${job}` : 'not from a run'));
      for (const snap of snaps) {
        group.appendChild(this.snapshotRow(snap));
      }
      this._snaps.appendChild(group);
    }
  }

  /** Two lines: pick box, short id, role, name / size, relative date, Restore. */
  private snapshotRow(snap: ISnapshot): HTMLDivElement {
    const item = el('div', 'lanenb-snapshot');
    item.dataset.snapshot = snap.id;
    const pick = el('input', 'lanenb-snap-pick');
    pick.type = 'checkbox';
    pick.checked = this._picked.includes(snap.id);
    pick.setAttribute('aria-label', `pick snapshot ${snap.id} to diff`);
    pick.onchange = () => {
      this._picked = this._picked.filter(id => id !== snap.id);
      if (pick.checked) {
        this._picked.push(snap.id);
        if (this._picked.length > 2) {
          this._picked.shift();
          this.renderPicks();
        }
      }
      this.updateDiffButton();
    };
    const id = el('code', 'lanenb-snapshot-id', snap.id.slice(0, SHORT_ID));
    id.title = `${snap.id}\n${snap.volume}`;
    const name = el('span', 'lanenb-snap-name', snap.name);
    name.title = snap.name;
    const top = el('div', 'lanenb-job-row');
    top.append(pick, id);
    if (snap.labels.role) {
      top.appendChild(el('span', 'lanenb-snap-role', snap.labels.role));
    }
    top.appendChild(name);
    const when = el('span', 'lanenb-snap-when', relativeTime(snap.created));
    when.title = new Date(snap.created * 1000).toLocaleString();
    const restore = el('button', 'lanenb-restore jp-mod-styled', 'Restore');
    restore.title = `restore ${snap.id} into a new directory`;
    restore.onclick = () => this.restore(snap);
    const bottom = el('div', 'lanenb-job-row lanenb-snap-meta');
    bottom.append(el('span', 'lanenb-snap-size', formatBytes(snap.size)), when, restore);
    item.append(top, bottom);
    return item;
  }

  private renderPicks(): void {
    this._snaps.querySelectorAll<HTMLInputElement>('.lanenb-snap-pick').forEach(box => {
      const id = box.closest<HTMLElement>('.lanenb-snapshot')?.dataset.snapshot ?? '';
      box.checked = this._picked.includes(id);
    });
  }

  private updateDiffButton(): void {
    this._diff.disabled = this._picked.length !== 2;
    // short enough for the section's header; the tooltip says what it compares (or what to do)
    const two = this._picked.length === 2;
    this._diff.textContent = two ? 'Diff picked' : 'Diff';
    this._diff.title = two
      ? `diff ${this._picked[0].slice(0, 8)} \u2192 ${this._picked[1].slice(0, 8)}`
      : 'tick two versions below to diff them';
  }

  private async diffPicked(): Promise<void> {
    if (this._picked.length !== 2) {
      return;
    }
    const [a, b] = this._picked;
    try {
      const diff = await api.diff(a, b);
      await showDialog({
        title: `Snapshot ${a.slice(0, SHORT_ID)} → ${b.slice(0, SHORT_ID)}`,
        body: new Widget({ node: diffBody(diff) }),
        buttons: [Dialog.okButton({ label: 'Close' })]
      });
    } catch (err) {
      await showErrorMessage('Could not diff', String((err as Error).message));
    }
  }

  private async restore(snap: ISnapshot): Promise<void> {
    const answer = await InputDialog.getText({
      title: `Restore snapshot ${snap.id}`,
      label: 'New directory (relative to the Jupyter root; must not exist):',
      placeholder: `restored-${snap.name}`,
      okLabel: 'Restore'
    });
    if (!answer.button.accept || !answer.value) {
      return;
    }
    try {
      const result = await api.restore(snap.id, answer.value);
      this.say(`Restored ${snap.id.slice(0, SHORT_ID)} into ${result.volume}`);
    } catch (err) {
      await showErrorMessage('Could not restore', String((err as Error).message));
    }
  }

  private _picked: string[] = [];
  private _pressedAt = 0; // when a pointer went down on a row, 0 once released
  private readonly _released: () => void;
  private _rows = new Map<string, { key: string; node: HTMLDivElement }>();
  private readonly _jobs: HTMLDivElement;
  private readonly _team: TeamSection;
  private readonly _sweeps: SweepList;
  private readonly _snaps: HTMLDivElement;
  private readonly _message: HTMLDivElement;
  private readonly _diff: HTMLButtonElement;
  private readonly _poll: Poll;
  private readonly _others: Poll;
}
