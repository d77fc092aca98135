// Suspend / Resume and the doctor's advice as one button ("Apply: loader workers 6"), for the
// sidebar's job rows and the live view: each calls the server (lanenb.server.api.suspend_job,
// resume_job, apply_change), which calls Job.suspend / Job.resume, and says why when it cannot.
import { showErrorMessage } from '@jupyterlab/apputils';

import { api, IVerdict } from './api';
import { el } from './dom';
import { RESUMABLE, SUSPENDABLE } from './formats';
// the words a setting is shown with (the doctor's own: "loader workers 2 -> try 6")
const SETTING_WORDS: Record<string, string> = { num_workers: 'loader workers', processes: 'ranks' };

/** "Apply: loader workers 6" for a verdict's change. */
export function applyLabel(change: { setting: string; value: number }): string {
  return `Apply: ${SETTING_WORDS[change.setting] ?? change.setting} ${change.value}`;
}

function button(label: string, title: string, run: () => Promise<unknown>, after: () => void): HTMLButtonElement {
  const b = el('button', 'lanenb-pause jp-mod-styled', label);
  b.title = title;
  b.onclick = async () => {
    b.disabled = true; // a suspend waits for the checkpoint: one request at a time
    try {
      await run();
    } catch (err) {
      await showErrorMessage(`Could not ${label.toLowerCase()}`, String((err as Error).message));
    } finally {
      b.disabled = false;
      after();
    }
  };
  return b;
}

/** The buttons a job in `state` offers: Suspend while it runs (plus Apply when the verdict names
 *  a change), Resume once suspended or preempted; `after` refreshes the view. */
export function pauseButtons(
  name: string,
  state: string,
  verdict: IVerdict | null | undefined,
  after: () => void
): HTMLButtonElement[] {
  const out: HTMLButtonElement[] = [];
  if (SUSPENDABLE.has(state)) {
    out.push(button('Suspend', `checkpoint job ${name} at the next step and free its cores`,
      () => api.suspend(name), after));
    const change = verdict?.change;
    if (change) {
      out.push(button(applyLabel(change), `suspend job ${name} at a step boundary and resume it with ` +
        `${change.setting}=${change.value} (the doctor's advice)`, () => api.apply(name, change.setting, change.value),
      after));
    }
  } else if (RESUMABLE.has(state)) {
    out.push(button('Resume', `continue job ${name} from its checkpoint`, () => api.resume(name), after));
  }
  return out;
}
