// A running job's progress in the sidebar, in a real JupyterLab and Chromium: the running job
// recorded by tests/browser/test_lab_sidebar_fit.py (its supervisor is the test's process) gets
// new step events appended to its job.log, at different moments of the sidebar's polling; each
// new progress shows in its row within 2 s (the notebook's live view reads the log every second).
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';

const JOB = process.env.LANENB_UI_LAG_JOB || '';
const LOG = process.env.LANENB_UI_LAG_LOG || '';
const STEPS: Record<string, string> = JSON.parse(process.env.LANENB_UI_LAG_STEPS || '{}');

test.use({ autoGoto: true });
test.skip(!JOB, 'run by tests/browser/test_lab_sidebar_fit.py, which records the running job first');

test('a running job\'s new progress reaches the sidebar within 2 s', async ({ page }) => {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  const item = page.locator(`#lanenb-sidebar div.lanenb-job[data-job="${JOB}"]`);
  await expect(item.locator('.lanenb-chip')).toHaveText('running', { timeout: 30000 });
  await expect(item.locator('.lanenb-job-percent')).toHaveText(/^10%/, { timeout: 30000 });
  const lags: number[] = [];
  const pauses = [700, 1300, 400];
  for (const [i, [percent, line]] of Object.entries(STEPS).entries()) {
    await page.waitForTimeout(pauses[i % pauses.length]); // a different moment of the poll each time
    const start = Date.now();
    fs.appendFileSync(LOG, line + '\n');
    await expect(item.locator('.lanenb-job-percent')).toHaveText(new RegExp(`^${percent}%`), { timeout: 15000 });
    lags.push(Date.now() - start);
  }
  console.log(`sidebar lag behind the log: ${lags.join(' ms, ')} ms`);
  expect(Math.max(...lags)).toBeLessThan(2000);
});
