// Ask before a destructive action, then run it: one dialog for every Stop (a job, a sweep), so
// each says what will happen in the same words and reports a refusal the same way.
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';

export interface IConfirmation {
  /** the dialog's title, e.g. 'Stop training job' */
  title: string;
  /** what will happen, naming the object */
  body: string;
  /** the error dialog's title when the action fails */
  failure: string;
}

/** Ask; on "Stop" run `action`. True when it ran and succeeded. */
export async function confirmThen(what: IConfirmation, action: () => Promise<unknown>): Promise<boolean> {
  const result = await showDialog({
    title: what.title,
    body: what.body,
    buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Stop' })]
  });
  if (!result.button.accept) {
    return false;
  }
  try {
    await action();
    return true;
  } catch (err) {
    await showErrorMessage(what.failure, String((err as Error).message));
    return false;
  }
}
