// The "Lane training" sidebar in a real JupyterLab and Chromium, over real jobs: a job started
// by %lanetrain in a notebook cell is listed, reaches succeeded, its panel shows the trainer's
// log and charts; a running job's panel follows it live, names its bottleneck (the doctor's
// verdict, with a stacked bar per rank) and Stop cancels it; a snapshot is restored from the
// sidebar.
import { expect, galata, test } from '@jupyterlab/galata';
import * as path from 'path';

const DATA = process.env.LANENB_UI_DATA as string;
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';
const VERDICT = /^(input-bound|straggler|exchange-bound|gpu-underused|healthy): \S/;
const TRAIN =
  '--processes 1 --engine ddp --batch-size 2 --epochs 1 --img-height 64 --img-width 128 ' +
  '--log-every 1 --val-batch-size 4';

test.use({ autoGoto: true });
test.describe.configure({ mode: 'serial' });

async function openSidebar(page: any) {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  await expect(page.locator('#lanenb-sidebar .lanenb-sidebar-header')).toHaveText(
    /Lane training/i
  );
}

async function runInNotebook(page: any, name: string, source: string) {
  await page.notebook.createNew(name);
  await page.notebook.setCell(0, 'code', source);
  await page.notebook.runCell(0, false);
}

test('the extension activates and shows the Lane training sidebar', async ({ page }) => {
  const logs: string[] = [];
  page.on('console', (msg: any) => logs.push(msg.text()));
  await page.reload();
  await openSidebar(page);
  expect(logs.some(l => l.includes('JupyterLab extension lanenb is activated!'))).toBe(true);
});

test('a job launched from a notebook cell is listed, succeeds and its panel shows log and chart', async ({
  page
}) => {
  await openSidebar(page);
  await runInNotebook(
    page,
    'train.ipynb',
    `%load_ext lanenb\njob = %lanetrain --data ${DATA} ${TRAIN} --max-steps 4 --snapshot --name ui-train`
  );
  const item = page.locator('#lanenb-sidebar li[data-job="ui-train"]');
  await expect(item).toBeVisible({ timeout: 60000 });
  await expect(item.locator('.lanenb-job-state')).toHaveText('succeeded', { timeout: 180000 });
  await expect(item.locator('.lanenb-job-accuracy')).toHaveText(/acc \d\.\d{3}/);
  await expect(item.locator('.lanenb-job-percent')).toHaveText('100%');
  await item.locator('.lanenb-job-name').click();
  const panel = page.locator('.lanenb-job-panel');
  await expect(panel).toBeVisible();
  await expect(panel.locator('.lanenb-log')).toContainText(/epoch 0 step 1\/\d+ loss/, { timeout: 30000 });
  await expect(panel.locator('.lanenb-log')).toContainText('test');
  await expect(panel.locator('.lanenb-chart path.lanenb-chart-line').first()).toBeVisible();
  await expect(panel.locator('.lanenb-panel-status')).toContainText('succeeded');
  await page.screenshot({ path: path.join(SHOTS, 'job-panel.png') });
});

test('Stop in the sidebar asks for confirmation and cancels a running job', async ({ page }) => {
  await openSidebar(page);
  await runInNotebook(
    page,
    'long.ipynb',
    `%load_ext lanenb\njob = %lanetrain --data ${DATA} ${TRAIN} --epochs 500 --timing-every 2 --name ui-long`
  );
  const item = page.locator('#lanenb-sidebar li[data-job="ui-long"]');
  await expect(item.locator('.lanenb-job-state')).toHaveText('running', { timeout: 60000 });
  // its panel follows the live update stream: new lines, and charts from the state it carries
  await item.locator('.lanenb-job-name').click();
  const panel = page.locator('.lanenb-job-panel').filter({ hasText: 'ui-long:' });
  await expect(panel.locator('.lanenb-log')).toContainText(/step \d+\/\d+ loss/, { timeout: 60000 });
  await expect(panel.locator('.lanenb-chart path.lanenb-chart-line').first()).toBeVisible();
  await expect(panel.locator('.lanenb-panel-status')).toContainText('running');
  // the doctor's verdict while it runs, in the panel and the jobs list, and where a step goes
  await expect(panel.locator('.lanenb-verdict')).toHaveText(VERDICT, { timeout: 90000 });
  await expect(panel.locator('.lanenb-step-bars rect.lanenb-bar-compute')).toHaveCount(1);
  await expect(item.locator('.lanenb-job-verdict')).toHaveText(VERDICT, { timeout: 30000 });
  await item.locator('button.lanenb-stop').click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('Stop job "ui-long"?');
  await page.screenshot({ path: path.join(SHOTS, 'stop-dialog.png') });
  await dialog.locator('button.jp-mod-warn').click();
  await expect(item.locator('.lanenb-job-state')).toHaveText('cancelled', { timeout: 60000 });
  await expect(panel.locator('.lanenb-panel-status')).toContainText('cancelled'); // from its stream
  await expect(panel.locator('button.lanenb-stop')).toBeHidden();
  // the kernel that launched it sees the same outcome
  await page.activity.activateTab('long.ipynb');
  await page.notebook.setCell(0, 'code', 'print("kernel sees", job.status().state.value)');
  await page.notebook.runCell(0, true);
  await expect(page.locator('.jp-OutputArea-output').first()).toContainText('kernel sees cancelled');
});

test('a snapshot is restored from the sidebar into a new directory', async ({ page }) => {
  await openSidebar(page);
  const snap = page
    .locator('#lanenb-sidebar li.lanenb-snapshot')
    .filter({ hasText: 'run' })
    .filter({ hasText: 'ui-train' })
    .first();
  await expect(snap).toBeVisible({ timeout: 30000 });
  await page.screenshot({ path: path.join(SHOTS, 'sidebar.png') });
  await snap.locator('button.lanenb-restore').click();
  const dialog = page.locator('.jp-Dialog');
  await dialog.locator('input').fill('restored-ui-run');
  await dialog.locator('button.jp-mod-accept').click();
  await expect(page.locator('#lanenb-sidebar .lanenb-message')).toContainText(
    'restored-ui-run'
  );
  await page.screenshot({ path: path.join(SHOTS, 'restored.png') });
});

void galata;
