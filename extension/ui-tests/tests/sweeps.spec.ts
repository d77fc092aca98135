// A sweep in the "Lane training" sidebar, in a real JupyterLab and Chromium: the sweep recorded by
// tests/browser/test_lab_sweeps.py (its Optuna study as the driver leaves it: two finished trials
// and one pruned, no training) is listed with its state, trials and best value; a click opens its
// trials table (the pruned trial's why, the best trial starred) and the %lanesweep chart drawn by
// the sidebar's Vega renderer (the pruned trial's curve dashed); a second click closes it.
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const SWEEP = process.env.LANENB_UI_SWEEP || '';
const WHY = process.env.LANENB_UI_SWEEP_WHY || '';
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';

test.use({ autoGoto: true });
test.skip(!SWEEP, 'run by tests/browser/test_lab_sweeps.py, which records the sweep first');

test('a sweep opens in the sidebar with its trials table and chart', async ({ page }) => {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  const item = page.locator(`#lanenb-sidebar div.lanenb-sweep[data-sweep="${SWEEP}"]`);
  await expect(item.locator('.lanenb-chip')).toHaveText('finished');
  await expect(item.locator('.lanenb-sweep-trials')).toHaveText('3/3 trials');
  await expect(item.locator('.lanenb-sweep-best')).toHaveText('0.8 best val.accuracy · trial 0');
  await expect(item.locator('button.lanenb-stop')).toHaveCount(0); // no driver runs: nothing to stop

  const name = item.locator('button.lanenb-sweep-name');
  await name.click();
  const detail = item.locator('.lanenb-sweep-detail');
  await expect(detail.locator('.lanenb-sweep-settings')).toHaveText(
    'tpe + median · maximize val.accuracy · 1 at once'
  );
  const table = detail.locator('table.lanenb-trials');
  await expect(table.locator('th')).toHaveText(['trial', 'state', 'val.accuracy', 'epochs', 'lr', 'momentum']);
  const rows = table.locator('tbody tr.lanenb-trial');
  await expect(rows).toHaveCount(3);
  await expect(rows.nth(0).locator('td')).toHaveText(['0 ★', 'complete', '0.8', '3', '0.01', '0.9']);
  await expect(rows.nth(1).locator('td')).toHaveText(['1', 'pruned', '0.3', '1', '0.001', '0.8']);
  await expect(rows.nth(2).locator('td')).toHaveText(['2', 'complete', '0.7', '2', '0.02', '0.8']);
  // why the pruned trial stopped, on a row of its own under it (the driver's words)
  const why = table.locator('tbody tr.lanenb-trial-why-row');
  await expect(why).toHaveCount(1);
  await expect(why).toHaveAttribute('data-trial', '1');
  await expect(why).toHaveText(WHY);
  expect(WHY).toMatch(/^pruned at epoch 1: val\.accuracy 0\.300, the other trials' median there 0\.600/);
  await expect(table.locator('tbody tr').nth(2)).toHaveClass('lanenb-trial-why-row');
  await expect(detail.locator('tr.lanenb-trial-best')).toHaveAttribute('data-trial', '0');

  // the %lanesweep chart, one Vega view per part
  const charts = detail.locator('.lanenb-vchart');
  await expect(charts).toHaveCount(4);
  const each = detail.locator('.lanenb-vchart[data-panel="each trial"]');
  await expect(each).toHaveAttribute('data-ready', 'true');
  await expect(each.locator('svg g.mark-line path')).toHaveCount(3); // one curve a trial
  await expect(each.locator('svg g.mark-line path[stroke-dasharray="4,3"]')).toHaveCount(1); // pruned: dashed
  await expect(detail.locator('.lanenb-vchart[data-panel="val.accuracy vs lr"] svg g.mark-symbol.role-mark path')).toHaveCount(
    3
  );
  await page.screenshot({ path: path.join(SHOTS, 'sweep-sidebar.png') });

  await name.click();
  await expect(detail).toHaveCount(0);
  await expect(name).toHaveAttribute('aria-expanded', 'false');
});
