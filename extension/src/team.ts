// The sidebar's Team section: every lanenb MPIJob the server's credentials may read (whose, where,
// how big, its state and why a pending one waits, run time, progress, GPU use), GPUs by node,
// quotas, start estimates, and what RBAC kept from us. Closed at first: opening it starts its own
// Poll (every 5 s, standing by while the sidebar is hidden); the server answers from one watching
// collector, so a refresh costs the cluster nothing. Stop shows only where RBAC lets the delete
// through (the server asked a SelfSubjectAccessReview) and asks for the job's name first.
import { Dialog, InputDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Poll } from '@lumino/polling';

import { APIError, requestAPI } from './api';
import { el, fillName, formatDuration, stateChip } from './dom';

/** ``lanenb.team.rows.TeamJob.to_dict``. */
export interface ITeamJob {
  namespace: string;
  name: string;
  uid: string;
  user: string | null;
  mine: boolean;
  created: number | null;
  started: number | null;
  finished: number | null;
  run_s: number | null;
  state: string;
  reason: string | null;
  status: string;
  waiting: { kind: string; text: string } | null;
  workers: number;
  gpus_per_worker: number;
  ranks: number;
  gpus: number;
  size: string;
  gpus_held: number;
  nodes: string[];
  progress: number | null;
  eta_s: number | null;
  headline: string | null;
  gpu_util: number | null;
  can_cancel: boolean;
  start_estimate: string | null;
}

/** ``lanenb.team.capacity.NodeGpus.to_dict``. */
export interface ITeamNode {
  node: string;
  allocatable: number;
  allocated: number;
  free: number;
}

/** ``lanenb.team.capacity.QuotaUse.to_dict``. */
export interface ITeamQuota {
  namespace: string;
  quota: string;
  resource: string;
  used: number;
  hard: number;
  free: number;
}

/** ``lanenb.team.view.Unreadable.to_dict``. */
export interface ITeamUnreadable {
  what: string;
  namespace: string | null;
  means: string;
  message: string;
  text: string;
}

/** ``lanenb.team.view.TeamView.to_dict``: what ``GET /lanenb/team`` answers. */
export interface ITeamView {
  user: string;
  scope: string;
  namespaces: string[];
  now: number;
  jobs: ITeamJob[];
  nodes: ITeamNode[];
  partial_nodes: boolean;
  gpus: { total: number; allocated: number; free: number };
  quotas: ITeamQuota[];
  unreadable: ITeamUnreadable[];
  capacity: string;
}

const enc = encodeURIComponent;
// the server's answer when it has no cluster to read (lanenb.kube.client.KubernetesConfigError,
// "no kubeconfig at ..."): nothing went wrong, there is just no cluster configured for this
// JupyterLab. A kubeconfig that is there but unusable (a bad context, a broken file) stays an error.
function noCluster(err: unknown): boolean {
  return err instanceof APIError && err.reason === 'KubernetesConfigError' && /^no kubeconfig at /.test(err.message);
}

/** What the section says without a cluster: a neutral note, and how to connect one. */
function noClusterNote(): HTMLDivElement {
  const note = el('div', 'lanenb-team-note');
  note.dataset.kind = 'no-cluster';
  note.append(
    el('div', '', 'No Kubernetes cluster is configured for this JupyterLab.'),
    el(
      'div',
      'lanenb-team-note-how',
      "To see your team's jobs here, copy the cluster's kubeconfig to ~/.kube/config on the machine " +
        'JupyterLab runs on (or set the KUBECONFIG environment variable before starting it), then open Team again.'
    )
  );
  return note;
}

export const teamApi = {
  view: () => requestAPI<ITeamView>('team'),
  stop: (job: ITeamJob, confirm: string) =>
    requestAPI<{ stopped: boolean; reason?: string }>(`team/${enc(job.namespace)}/${enc(job.name)}/stop`, {
      method: 'POST',
      body: JSON.stringify({ confirm, uid: job.uid })
    })
};

/** Ask for the job's name (a teammate's run is not stopped by a stray click), then stop it. */
async function confirmTeamStop(job: ITeamJob): Promise<boolean> {
  const whose = job.mine ? 'your job' : `${job.user ?? 'someone'}'s job`;
  const answer = await InputDialog.getText({
    title: 'Stop a team job',
    label: `Stop ${whose} ${job.namespace}/${job.name}? Type its name to confirm.`,
    placeholder: job.name,
    okLabel: 'Stop'
  });
  if (!answer.button.accept || answer.value === null) {
    return false;
  }
  try {
    const done = await teamApi.stop(job, answer.value.trim());
    if (!done.stopped) {
      // gone already, or the name is another job's now: nothing was deleted, and the user is told why
      await showErrorMessage('Nothing was stopped', done.reason ?? 'the job is gone', [Dialog.okButton()]);
      return false;
    }
    return true;
  } catch (err) {
    await showErrorMessage('Could not stop the job', String((err as Error).message), [Dialog.okButton()]);
    return false;
  }
}

export class TeamSection {
  readonly node: HTMLDivElement;

  constructor() {
    this.node = el('div', 'lanenb-team');
    this._toggle = el('button', 'lanenb-section lanenb-team-toggle', 'Team ▸');
    this._toggle.setAttribute('aria-expanded', 'false');
    this._toggle.title = "every lanenb job you may read in the cluster, GPU capacity and quotas";
    this._toggle.onclick = () => this.setOpen(!this._open);
    this._body = el('div', 'lanenb-team-body');
    this._body.hidden = true;
    this.node.append(this._toggle, this._body);
  }

  dispose(): void {
    this._poll?.dispose();
    this._poll = null;
  }

  setOpen(open: boolean): void {
    this._open = open;
    this._toggle.textContent = open ? 'Team ▾' : 'Team ▸';
    this._toggle.setAttribute('aria-expanded', String(open));
    this._body.hidden = !open;
    if (open && !this._poll) {
      this._body.replaceChildren(el('div', 'lanenb-message', 'reading the cluster…'));
      this._poll = new Poll({
        auto: true,
        factory: () => this.refresh(),
        frequency: { interval: 5000, backoff: true, max: 60000 },
        name: 'lanenb:team',
        standby: 'when-hidden'
      });
    } else if (!open) {
      this.dispose();
    }
  }

  async refresh(): Promise<void> {
    try {
      this.render(await teamApi.view());
    } catch (err) {
      if (noCluster(err)) {
        this._body.replaceChildren(noClusterNote());
        return;
      }
      const message = el('div', 'lanenb-message', String((err as Error).message));
      message.dataset.kind = 'error';
      this._body.replaceChildren(message);
    }
  }

  render(view: ITeamView): void {
    const where = view.scope === 'cluster' ? 'all namespaces' : view.namespaces.join(', ');
    const parts: HTMLElement[] = [el('div', 'lanenb-team-scope', `${view.jobs.length} jobs · ${where}`)];
    parts.push(el('div', 'lanenb-team-capacity', view.capacity));
    for (const q of view.quotas) {
      parts.push(el('div', 'lanenb-team-quota', `quota ${q.namespace}/${q.quota}: ${q.used} of ${q.hard} GPUs used`));
    }
    if (view.jobs.length === 0) {
      parts.push(el('div', 'lanenb-empty', `No lanenb jobs in ${where}.`));
    }
    for (const job of view.jobs) {
      parts.push(this.row(job));
    }
    for (const u of view.unreadable) {
      const line = el('div', 'lanenb-team-unreadable', u.text);
      line.title = u.message;
      parts.push(line);
    }
    this._body.replaceChildren(...parts);
  }

  /** Two or three short lines: chip, name, user, Stop / size, run time, progress, GPU / why it waits. */
  private row(job: ITeamJob): HTMLDivElement {
    const item = el('div', `lanenb-job lanenb-team-job lanenb-state-${job.state}`);
    item.dataset.job = `${job.namespace}/${job.name}`;
    item.title = job.reason ?? job.status;
    const top = el('div', 'lanenb-job-row');
    const who = el('span', 'lanenb-team-user', job.mine ? `${job.user ?? '?'} (you)` : job.user ?? '?');
    const name = el('span', 'lanenb-job-name');
    fillName(name, job.name, `${job.namespace}/${job.name}`);
    top.append(stateChip(job.state), name, who);
    if (job.can_cancel) {
      const stop = el('button', 'lanenb-stop jp-mod-styled jp-mod-warn', 'Stop');
      stop.title = `stop ${job.namespace}/${job.name} (RBAC allows it)`;
      stop.onclick = async () => {
        if (await confirmTeamStop(job)) {
          void this._poll?.refresh();
        }
      };
      top.appendChild(stop);
    }
    const facts = [job.namespace, job.size];
    if (job.run_s !== null) {
      facts.push(`ran ${formatDuration(job.run_s)}`);
    }
    if (job.progress !== null) {
      const eta = job.eta_s !== null ? ` (ETA ${formatDuration(job.eta_s)})` : '';
      facts.push(`${Math.round(job.progress * 100)}%${eta}`);
    }
    if (job.gpu_util !== null) {
      facts.push(`GPU ${Math.round(job.gpu_util)}%`);
    }
    if (job.headline) {
      facts.push(job.headline);
    }
    item.append(top, el('div', 'lanenb-job-row lanenb-team-facts', facts.join(' · ')));
    if (job.waiting) {
      const why = el('div', 'lanenb-team-why', job.waiting.text);
      why.dataset.kind = job.waiting.kind;
      item.appendChild(why);
    }
    if (job.start_estimate) {
      item.appendChild(el('div', 'lanenb-team-estimate', job.start_estimate));
    }
    return item;
  }

  private _open = false;
  private _poll: Poll | null = null;
  private readonly _toggle: HTMLButtonElement;
  private readonly _body: HTMLDivElement;
}
