// The lanenb server extension's REST API (lanenb/server/handlers.py), always under the
// server's base URL (behind JupyterHub that is /user/<name>/). ServerConnection adds the
// token / XSRF header Jupyter server expects.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type { Rows, Spec } from './vegacharts';

// The payload types below are written once in Python, lanenb/server/payloads.py (one TypedDict
// per interface: IName <-> Name); tests/server/test_payload_types.py fails when a field is on
// one side only. Change both, and the producer the TypedDict's docstring names.

/** The newest system samples of the lowest rank (lanenb.analysis.summary.utilisation). */
export interface IUtilisation {
  metric: 'gpu_util' | 'cpu_percent' | null;
  rank?: number;
  values: number[];
  last: { [key: string]: number };
}

/** A rank's step split (RunState.breakdown): shares 0..1 of a step, and seconds per step. */
export interface IStepSplit {
  data: number;
  compute: number;
  exchange: number;
  other: number;
  step_s: number;
}

/** The doctor's verdict (lanenb.analysis.doctor.Verdict.to_dict): `line` starts with `kind`. */
export interface IVerdict {
  kind:
    | 'input-bound'
    | 'straggler'
    | 'exchange-bound'
    | 'gpu-underused'
    | 'healthy'
    | 'unknown';
  message: string;
  action: string;
  rank: number | null;
  host: string | null;
  value: number | null;
  /** The advice as one setting a resume applies ("Apply: loader workers 6"); null otherwise. */
  change: { setting: string; value: number } | null;
  line: string;
  /** ok / warn / error / muted (lanenb.charts.vocabulary): the CSS variable --lanenb-<severity>. */
  severity: 'ok' | 'active' | 'warn' | 'error' | 'muted';
}

/** One scored model (lanenb_trainer.evaluation.headline.Figure.to_dict). */
export interface IFigure {
  model: string;
  epoch: number | null;
  label: string;
  split: 'test' | 'val';
  accuracy: number | null;
  fp: number | null;
  fn: number | null;
  frames: number | null;
  /** the official 200 ms rule's score; the headline (`accuracy`) scores the lanes alone */
  official_accuracy: number | null;
  over_time_frames: number | null;
  latency_ms_p50: number | null;
  /** "12/40 frames over the 200 ms real-time limit ...; official score 0.71", or "" */
  realtime: string;
}

/** The run's headline figure with its model label, the other test model beside it
 * (Headline.to_dict): `text` is the words every face shows, e.g.
 * "test acc 0.9380 (best.pt, epoch 7), 0.9480 (last, epoch 10)"; `cell` a table's words. Its
 * `epoch` is the 0-based index, its `label` counts from 1. */
export interface IHeadline extends IFigure {
  text: string;
  cell: string;
  other: IFigure | null;
}

/** One row of lanenb.analysis.summary.job_summary: the same fields %lanejobs and
 * `lanenb jobs list` format. A job whose state could not be read has `error` set, state
 * "unknown" and the rest null. */
export interface IJobSummary {
  name: string;
  backend: string;
  created: number | null;
  age_s: number | null;
  run_dir: string | null;
  state: string;
  reason: string | null;
  status: string;
  progress: number | null;
  step: number | null;
  total_steps: number | null;
  eta_s: number | null;
  accuracy: number | null;
  accuracy_split: 'test' | 'val' | null;
  /** Which model `accuracy` is for: "best.pt, epoch 7", "last, epoch 10", "epoch 3" (epochs from 1). */
  accuracy_label: string | null;
  headline: IHeadline | null;
  loss: number | null;
  summary: string | null;
  utilisation: IUtilisation;
  final: boolean;
  error: string | null;
  /** The doctor's verdict, null when no face shows one (lanenb.analysis.doctor.shown_verdict). */
  verdict: IVerdict | null;
  breakdown: { [rank: string]: IStepSplit };
}

/** Where a job stands (lanenb.contract.status.JobStatus.to_dict). */
export interface IJobStatus {
  state: string;
  reason: string | null;
  message: string | null;
  started: number | null;
  finished: number | null;
  ranks: { [rank: string]: unknown };
  exit_code: number | null;
}

/** One log line of an update: `rank` null for the launcher's own lines. */
export interface IUpdateLine {
  rank: number | null;
  text: string;
  source: string;
  error: boolean;
}

/** One update of a job's stream (lanenb.server.feeds.update_dict): a status change, a log line
 * (with its `@lanenb` event, and `display`: the line in words, null for charted samples). */
export interface IUpdate {
  cursor: string;
  status?: IJobStatus;
  line?: IUpdateLine;
  event?: { kind: string; [key: string]: unknown };
  display?: string | null;
}

/** One row per rank (lanenb.analysis.chartdata.rank_table). */
export interface IRankRow {
  rank: number;
  host: string | null;
  gpu_util: number | null;
  gpu_mem_mb: number | null;
  gpu_mem_total_mb: number | null;
  cpu_percent: number | null;
  rss_mb: number | null;
  step_s: number | null;
  data: number | null;
  compute: number | null;
  exchange: number | null;
  other: number | null;
}

/** The Vega-Lite panels and their rows (lanenb.analysis.chartdata): the notebook's charts. */
export interface IRunCharts {
  specs: Spec[];
  rows: Rows;
}

/** What the job panel draws (lanenb.server.feeds.JobFeed.panel_state), sent with the updates
 * when asked: the status line's fields, the headline, the verdict, the rank table and the
 * charts. The run's whole history is GET lanenb/jobs/<name>/metrics (for scripts). */
export interface IJobPanelState {
  state: string;
  step: number;
  total_steps: number | null;
  /** The 0-based epoch index the events carry: shown from 1 (dom.ts epochText). */
  epoch: number;
  /** The run's --epochs (`epochs` is the per-epoch history in GET .../metrics). */
  epochs_total: number | null;
  progress: number | null;
  eta_s: number | null;
  world_size: number | null;
  headline: IHeadline | null;
  /** The doctor's verdict, null when no face shows one (lanenb.analysis.doctor.shown_verdict). */
  verdict: IVerdict | null;
  ranks: IRankRow[];
  charts: IRunCharts;
}

/** GET lanenb/jobs/<name>/updates (lanenb.server.feeds.JobFeed.updates). */
export interface IUpdateBatch {
  updates: IUpdate[];
  cursor: string | null;
  final: boolean;
  status: IJobStatus | null;
  /** Present when the request asked for it (`state: true`). */
  state?: IJobPanelState;
}

/** POST lanenb/jobs/<name>/stop, /suspend, /resume and /apply (lanenb.server.api.stop_job,
 * suspend_job, resume_job, apply_change). */
export interface IStopReply {
  name: string;
  status: IJobStatus;
}

/** How to read the update stream: `wait` seconds of long poll (at most 25), `tail` lines to
 * start with when there is no cursor yet (the live end, not the log's start), `state` to
 * have the job panel's state sent along. */
export interface IUpdateOptions {
  wait?: number;
  tail?: number;
  state?: boolean;
}

/** One row of GET lanenb/snapshots (lanenb.snapshots.base.Snapshot.to_dict and its `job`). */
export interface ISnapshot {
  id: string;
  name: string;
  volume: string;
  created: number;
  size: number | null;
  labels: { [key: string]: string };
  ready: boolean;
  backend: string;
  file_count: number | null;
  error: string | null;
  job: string | null;
}

/** One path that differs between two snapshots (lanenb.snapshots.base.FileChange). */
export interface IFileChange {
  path: string;
  change: 'added' | 'removed' | 'changed';
  size_before: number | null;
  size_after: number | null;
}

/** GET /lanenb/snapshots/diff?a=&b= (lanenb.server.api.diff_snapshots). */
export interface ISnapshotDiff {
  a: string;
  b: string;
  summary: string;
  changes: IFileChange[];
}

/** POST lanenb/snapshots/<id>/restore (lanenb.server.api.restore_snapshot). */
export interface IRestoreReply {
  id: string;
  volume: string;
}

/** A sweep's state (lanenb.sweeps.Sweep.state); "unknown" when its study could not be read. */
export type SweepState =
  | 'running'
  | 'stopping'
  | 'finished'
  | 'stopped'
  | 'created'
  | 'interrupted'
  | 'unknown';

/** The best finished trial of a sweep (lanenb.sweeps.Sweep.best). */
export interface ISweepBest {
  number: number;
  job: string | null;
  params: { [name: string]: number | string | boolean | null };
  value: number;
  /** The objective's label, e.g. "val.accuracy". */
  objective: string;
}

/** What a sweep optimises, as its list row shows it. */
export interface ISweepObjective {
  label: string;
  direction: 'maximize' | 'minimize';
}

/** One row of GET /lanenb/sweeps (lanenb.sweeps.Sweep.summary), newest sweep first. A sweep
 * whose study could not be read has `error` set, state "unknown" and the rest null. */
export interface ISweepSummary {
  name: string;
  state: SweepState;
  /** Trials asked for in all, settled ones (complete, pruned or failed), running ones. */
  trials_total: number | null;
  trials_done: number | null;
  trials_running: number | null;
  best: ISweepBest | null;
  objective: ISweepObjective | null;
  sampler: string | null;
  pruner: string | null;
  error?: string;
}

/** One trial of the trials table (lanenb.sweeps.TrialRow.to_dict): `value` is its best
 * epoch's objective, `epochs` the validation results it reported, `why` says why a trial was
 * pruned ("pruned at epoch 2: val.accuracy 0.610, ...") or failed. */
export interface ITrialRow {
  number: number;
  state: 'running' | 'complete' | 'pruned' | 'failed' | 'waiting';
  params: { [name: string]: number | string | boolean | null };
  value: number | null;
  epochs: number;
  job: string | null;
  why: string | null;
}

/** One searched flag (lanenb.sweeps.space.Dimension). */
export interface ISearchDimension {
  name: string;
  kind: 'float' | 'int' | 'choice';
  low: number | null;
  high: number | null;
  log: boolean;
  choices: (number | string | boolean)[];
}

/** A sweep's settings (lanenb.sweeps.driver.SweepSettings), the base job redacted. */
export interface ISweepSettings {
  space: ISearchDimension[];
  trials: number;
  parallel: number;
  sampler: string;
  pruner: string;
  min_epochs: number;
  seed: number | null;
  objective: { split: string; field: string; direction: 'maximize' | 'minimize' };
  base: { [field: string]: unknown };
}

/** GET /lanenb/sweeps/<name> (lanenb.server.api.sweep_detail): the summary, the trials table,
 * the settings (the base job with secret-looking values redacted) and the %lanesweep chart as
 * one Vega-Lite spec per part (values inline). */
export interface ISweepDetail extends ISweepSummary {
  params: string[];
  trials: ITrialRow[];
  settings: ISweepSettings;
  charts: Spec[];
}

/** POST lanenb/sweeps/<name>/stop (lanenb.server.api.stop_sweep). */
export interface ISweepStopReply {
  name: string;
  state: SweepState;
}

/** An error the server answered with: its JSON ``message`` is meant for people. */
export class APIError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** The server's name for the error (the lanenb exception's class, e.g. KubernetesConfigError). */
    readonly reason: string | null = null
  ) {
    super(message);
  }
}

export async function requestAPI<T>(
  path: string,
  init: RequestInit = {},
  query: { [key: string]: string | undefined } = {}
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) {
      params.set(key, value);
    }
  }
  const qs = params.toString();
  const url =
    URLExt.join(settings.baseUrl, 'lanenb', path) + (qs ? `?${qs}` : '');
  const response = await ServerConnection.makeRequest(url, init, settings);
  const text = await response.text();
  let data: unknown;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { message: text };
  }
  if (!response.ok) {
    const reply = data as { message?: string; reason?: string | null } | null;
    throw new APIError(reply?.message || response.statusText, response.status, reply?.reason ?? null);
  }
  return data as T;
}

const enc = encodeURIComponent;

export const api = {
  jobs: () => requestAPI<{ jobs: IJobSummary[] }>('jobs'),
  updates: (name: string, cursor: string | null, opts: IUpdateOptions = {}) =>
    requestAPI<IUpdateBatch>(`jobs/${enc(name)}/updates`, {}, {
      cursor: cursor ?? undefined,
      wait: opts.wait ? String(opts.wait) : undefined,
      tail: cursor === null && opts.tail !== undefined ? String(opts.tail) : undefined,
      state: opts.state ? '1' : undefined
    }),
  stop: (name: string) =>
    requestAPI<IStopReply>(`jobs/${enc(name)}/stop`, {
      method: 'POST',
      body: JSON.stringify({ confirm: name })
    }),
  suspend: (name: string) => requestAPI<IStopReply>(`jobs/${enc(name)}/suspend`, { method: 'POST', body: '{}' }),
  resume: (name: string, changes: Record<string, number> = {}) =>
    requestAPI<IStopReply>(`jobs/${enc(name)}/resume`, {
      method: 'POST',
      body: JSON.stringify({ changes })
    }),
  apply: (name: string, setting: string, value: number) =>
    requestAPI<IStopReply>(`jobs/${enc(name)}/apply`, {
      method: 'POST',
      body: JSON.stringify({ setting, value })
    }),
  sweeps: () => requestAPI<{ sweeps: ISweepSummary[] }>('sweeps'),
  sweep: (name: string) => requestAPI<ISweepDetail>(`sweeps/${enc(name)}`),
  stopSweep: (name: string) =>
    requestAPI<ISweepStopReply>(`sweeps/${enc(name)}/stop`, {
      method: 'POST',
      body: JSON.stringify({ confirm: name })
    }),
  snapshots: () => requestAPI<{ snapshots: ISnapshot[] }>('snapshots'),
  diff: (a: string, b: string) => requestAPI<ISnapshotDiff>('snapshots/diff', {}, { a, b }),
  restore: (id: string, newVolume: string) =>
    requestAPI<IRestoreReply>(`snapshots/${enc(id)}/restore`, {
      method: 'POST',
      body: JSON.stringify({ new_volume: newVolume })
    })
};
