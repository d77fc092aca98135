// Suspend and Resume from the sidebar's job row, in a real JupyterLab and Chromium: the running
// 2-rank training job that tests/browser/test_lab_suspend.py submitted shows a Suspend button;
// clicking it checkpoints every rank and the row turns "suspended" with a Resume button, which
// starts the ranks again from the checkpoint (the row turns "running").
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const JOB = process.env.LANENB_UI_JOB || '';
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';

test.use({ autoGoto: true });
test.skip(!JOB, 'run by tests/browser/test_lab_suspend.py, which starts the job first');

test('a running job is suspended and resumed from its sidebar row', async ({ page }) => {
  test.setTimeout(180_000);
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  const row = page.locator(`#lanenb-sidebar div.lanenb-job[data-job="${JOB}"]`);
  await expect(row.locator('.lanenb-chip')).toHaveText('running', { timeout: 60_000 });
  await row.getByRole('button', { name: 'Suspend', exact: true }).click();
  await expect(row.locator('.lanenb-chip')).toHaveText('suspended', { timeout: 90_000 });
  await expect(row.getByRole('button', { name: 'Suspend', exact: true })).toHaveCount(0);
  // the buttons have a line of their own: the job's name is never squeezed out beside them
  const nameFits = await row.locator('.lanenb-job-name').evaluate(n => n.scrollWidth <= n.clientWidth);
  expect(nameFits).toBe(true);
  await page.locator('#lanenb-sidebar').screenshot({ path: path.join(SHOTS, 'suspended.png') });
  await row.getByRole('button', { name: 'Resume', exact: true }).click();
  await expect(row.locator('.lanenb-chip')).toHaveText('running', { timeout: 60_000 });
  await expect(row.getByRole('button', { name: 'Suspend', exact: true })).toBeVisible();
});
