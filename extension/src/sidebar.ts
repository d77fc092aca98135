// The "Lane training" sidebar: jobs newest first (state, progress, accuracy, utilisation
// sparkline, Stop, the doctor's verdict line) and snapshots (Restore into a new directory). Refreshed by a Poll that
// stands by while the sidebar is hidden.
import { Dialog, InputDialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { api, IJobSummary, ISnapshot } from './api';
import { sparkline } from './charts';

const RUNNING = new Set(['pending', 'running', 'restarting', 'suspended']);

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = cls;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function percent(value: number | null | undefined): string {
  return value === null || value === undefined
    ? '–'
    : `${Math.round(value * 100)}%`;
}

/** Ask, then stop: the dialog names the job, the request repeats its name. */
export async function confirmStop(name: string): Promise<boolean> {
  const result = await showDialog({
    title: 'Stop training job',
    body: `Stop job "${name}"? Its ranks get SIGTERM; it will show as cancelled everywhere.`,
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Stop' })]
  });
  if (!result.button.accept) {
    return false;
  }
  try {
    await api.stop(name);
    return true;
  } catch (err) {
    await showErrorMessage('Could not stop the job', String((err as Error).message));
    return false;
  }
}

export class LaneSidebar extends Widget {
  constructor(private readonly openJob: (name: string) => void) {
    super();
    this.id = 'lanenb-sidebar';
    this.addClass('lanenb-sidebar');
    this.title.caption = 'Lane training';
    const header = el('div', 'lanenb-sidebar-header', 'Lane training');
    this._jobs = el('ul', 'lanenb-jobs');
    this._snaps = el('ul', 'lanenb-snapshots');
    this._message = el('div', 'lanenb-message');
    this.node.append(
      header,
      this._message,
      el('h3', 'lanenb-section', 'Jobs'),
      this._jobs,
      el('h3', 'lanenb-section', 'Snapshots'),
      this._snaps
    );
    this._poll = new Poll({
      auto: true,
      factory: () => this.refresh(),
      frequency: { interval: 3000, backoff: true, max: 30000 },
      name: 'lanenb:sidebar',
      standby: 'when-hidden'
    });
  }

  dispose(): void {
    this._poll.dispose();
    super.dispose();
  }

  /** Ask for an immediate refresh (after Stop or Restore). */
  refreshNow(): Promise<void> {
    return this._poll.refresh();
  }

  async refresh(): Promise<void> {
    try {
      const [{ jobs }, { snapshots }] = await Promise.all([
        api.jobs(),
        api.snapshots()
      ]);
      this._message.textContent = '';
      this.renderJobs(jobs);
      this.renderSnapshots(snapshots);
    } catch (err) {
      this._message.textContent = `lanenb: ${(err as Error).message}`;
      throw err; // the poll backs off
    }
  }

  private renderJobs(jobs: IJobSummary[]): void {
    this._jobs.replaceChildren();
    if (jobs.length === 0) {
      this._jobs.appendChild(
        el('li', 'lanenb-empty', 'No jobs yet: run %lanetrain in a notebook.')
      );
    }
    for (const job of jobs) {
      const item = el('li', `lanenb-job lanenb-state-${job.state}`);
      item.dataset.job = job.name;
      item.title = job.error || job.summary || job.state;
      const top = el('div', 'lanenb-job-row');
      const name = el('button', 'lanenb-job-name', job.name);
      name.onclick = () => this.openJob(job.name);
      top.append(name, el('span', 'lanenb-job-state', job.state));
      const bottom = el('div', 'lanenb-job-row');
      const bar = el('progress', 'lanenb-job-progress');
      bar.max = 1;
      bar.value = job.progress ?? 0;
      const acc = job.headline
        ? job.headline.text
        : job.accuracy === null || job.accuracy === undefined
          ? 'acc –'
          : `acc ${job.accuracy.toFixed(3)}`;
      const util = job.utilisation;
      const spark = sparkline(util.values);
      spark.setAttribute(
        'aria-label',
        `${util.metric === 'gpu_util' ? 'GPU' : 'CPU'} utilisation`
      );
      bottom.append(
        bar,
        el('span', 'lanenb-job-percent', percent(job.progress)),
        el('span', 'lanenb-job-accuracy', acc),
        el('span', 'lanenb-job-util', util.metric === 'gpu_util' ? 'GPU' : 'CPU'),
        spark
      );
      if (RUNNING.has(job.state)) {
        const stop = el('button', 'lanenb-stop jp-mod-styled jp-mod-warn', 'Stop');
        stop.onclick = async () => {
          if (await confirmStop(job.name)) {
            void this.refreshNow();
          }
        };
        top.appendChild(stop);
      }
      item.append(top, bottom);
      if (job.verdict && job.verdict_kind && job.verdict_kind !== 'unknown') {
        const verdict = el('div', 'lanenb-verdict lanenb-job-verdict', job.verdict);
        verdict.dataset.kind = job.verdict_kind;
        verdict.title = job.verdict;
        item.appendChild(verdict);
      }
      this._jobs.appendChild(item);
    }
  }

  private renderSnapshots(snapshots: ISnapshot[]): void {
    this._snaps.replaceChildren();
    if (snapshots.length === 0) {
      this._snaps.appendChild(
        el('li', 'lanenb-empty', 'No snapshots yet: train with --snapshot.')
      );
    }
    for (const snap of snapshots) {
      const item = el('li', 'lanenb-snapshot');
      item.dataset.snapshot = snap.id;
      const when = new Date(snap.created * 1000).toLocaleString();
      const role = snap.labels.role ? ` ${snap.labels.role}` : '';
      item.append(
        el('span', 'lanenb-snapshot-id', snap.id),
        el(
          'span',
          'lanenb-snapshot-info',
          `${snap.name}${role} · ${snap.job ? 'job ' + snap.job + ' · ' : ''}${when}`
        )
      );
      item.title = `${snap.volume}`;
      const restore = el('button', 'lanenb-restore jp-mod-styled', 'Restore');
      restore.onclick = () => this.restore(snap);
      item.appendChild(restore);
      this._snaps.appendChild(item);
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
      this._message.textContent = `Restored ${snap.id} into ${result.volume}`;
    } catch (err) {
      await showErrorMessage('Could not restore', String((err as Error).message));
    }
  }

  private readonly _jobs: HTMLUListElement;
  private readonly _snaps: HTMLUListElement;
  private readonly _message: HTMLDivElement;
  private readonly _poll: Poll;
}
