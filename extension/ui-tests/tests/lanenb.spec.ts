// The "Lane training" sidebar in a real JupyterLab and Chromium, over real jobs: a job started
// by %lanetrain in a notebook cell is listed, reaches succeeded, its notebook view and its panel
// show interactive charts (a hovered point's value is read from the tooltip, a legend click
// hides a series, the log scale switch) with the trainer's log; a running job's panel follows it
// live, names its bottleneck (the doctor's verdict, with a stacked bar per rank) and Stop cancels
// it; two snapshots are diffed and one is restored from the sidebar.
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

/** The opacity Vega gave the first line of a chart's `series` (SVG renderer). */
async function lineOpacity(chart: any, stroke: string): Promise<string | null> {
  return chart.evaluate((node: HTMLElement, colour: string) => {
    const line = Array.from(node.querySelectorAll('g.mark-line path')).find(
      p => (p.getAttribute('stroke') || '').toLowerCase() === colour
    );
    return line ? line.getAttribute('opacity') ?? '1' : null;
  }, stroke);
}

/** Hover the middle of a chart's plot area and return the tooltip's text. */
async function hoverValue(page: any, chart: any): Promise<string> {
  const box = await chart.locator('svg g.mark-rule, svg g.mark-point').first().evaluate((g: Element) => {
    const svg = g.closest('svg') as SVGSVGElement;
    const bg = svg.querySelector('path.background') as SVGGraphicsElement | null;
    const r = (bg ?? svg).getBoundingClientRect();
    return { x: r.x, y: r.y, w: r.width, h: r.height };
  });
  const tooltip = page.locator('#vg-tooltip-element');
  for (const fx of [0.5, 0.3, 0.7, 0.1, 0.9]) {
    await page.mouse.move(box.x + box.w * fx, box.y + box.h * 0.5);
    await page.waitForTimeout(150);
    if (await tooltip.isVisible()) {
      return (await tooltip.textContent()) ?? '';
    }
  }
  await expect(tooltip).toBeVisible();
  return (await tooltip.textContent()) ?? '';
}

async function runInNotebook(page: any, name: string, source: string) {
  await page.notebook.createNew(name);
  await page.notebook.setCell(0, 'code', source);
  await page.notebook.runCell(0, false);
}

/** Wait for the cell's launch line; a refusal or a traceback fails here with its own words. */
async function expectLaunched(page: any, job: string) {
  const output = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output');
  await expect(output.first()).toContainText(new RegExp(`launched ${job}|Error|error`), { timeout: 120000 });
  const text = (await output.allTextContents()).join('\n');
  expect(text, `the cell that launches ${job} printed:\n${text}`).toContain(`launched ${job}`);
}

test('the extension activates and shows the Lane training sidebar', async ({ page }) => {
  const logs: string[] = [];
  page.on('console', (msg: any) => logs.push(msg.text()));
  await page.reload();
  await openSidebar(page);
  expect(logs.some(l => l.includes('JupyterLab extension lanenb is activated!'))).toBe(true);
});

test('a job launched from a notebook cell is listed, succeeds and its charts are interactive', async ({
  page
}) => {
  await openSidebar(page);
  await runInNotebook(
    page,
    'train.ipynb',
    `%load_ext lanenb\njob = %lanetrain --data ${DATA} ${TRAIN} --max-steps 6 --snapshot --name ui-train`
  );
  await expectLaunched(page, 'ui-train');
  const item = page.locator('#lanenb-sidebar div.lanenb-job[data-job="ui-train"]');
  await expect(item).toBeVisible({ timeout: 60000 });
  await expect(item.locator('.lanenb-chip')).toHaveText('succeeded', { timeout: 180000 });
  // the headline with its model label, the same words as %lanejobs
  await expect(item.locator('.lanenb-acc-value')).toHaveText(/\d\.\d{3}/);
  await expect(item.locator('.lanenb-acc-label')).toHaveText(/test · (best\.pt|last)/);
  await expect(item.locator('.lanenb-job-percent')).toHaveText(/100%/);
  await expect(item.locator('.lanenb-spark-value')).toHaveText(/CPU (\d+%|–)/);
  // the notebook's live view: the same Vega-Lite panels, hover shows a value
  const nbLoss = page.locator('.jp-OutputArea .lanenb-livecharts .lanenb-vchart[data-panel="loss"]');
  await expect(nbLoss.locator('svg')).toBeVisible({ timeout: 60000 });
  expect(await hoverValue(page, nbLoss)).toMatch(/loss\s*\d+\.\d{4}/);
  await page.screenshot({ path: path.join(SHOTS, 'notebook-view.png') });
  // the job panel
  await item.locator('.lanenb-job-name').click();
  const panel = page.locator('.lanenb-job-panel');
  await expect(panel).toBeVisible();
  // epochs counted from 1 in every text, as the chart's axis: the log and the status line
  await expect(panel.locator('.lanenb-log')).toContainText(/epoch 1 step 1\/\d+ loss/, { timeout: 30000 });
  await expect(panel.locator('.lanenb-panel-status')).toContainText(/ · epoch 1\/1$/); // --epochs 1
  await expect(panel.locator('.lanenb-log')).toContainText('test');
  await expect(panel.locator('.lanenb-chip')).toHaveText('succeeded');
  await expect(panel.locator('.lanenb-panel-headline')).toHaveText(/test acc \d\.\d{4} \((best\.pt|last)/);
  const loss = panel.locator('.lanenb-vchart[data-panel="loss"]');
  await expect(loss).toHaveAttribute('data-ready', 'true', { timeout: 30000 });
  await expect(panel.locator('.lanenb-vchart[data-panel="cpu"] svg')).toBeVisible();
  // hover: the tooltip names the step, the loss and the learning rate there
  const tip = await hoverValue(page, loss);
  expect(tip).toMatch(/step\s*\d+/);
  expect(tip).toMatch(/loss\s*\d+\.\d{4}/);
  await page.screenshot({ path: path.join(SHOTS, 'job-panel-hover.png') });
  // legend toggle: a click on "LR" shows the learning rate alone, the loss line fades
  expect(await lineOpacity(loss, '#1f77b4')).toBe('1');
  await loss.locator('g.role-legend text', { hasText: /^LR$/ }).click();
  await expect.poll(() => lineOpacity(loss, '#1f77b4')).toBe('0.12');
  expect(await lineOpacity(loss, '#ff7f0e')).toBe('1');
  await page.screenshot({ path: path.join(SHOTS, 'job-panel-toggle.png') });
  // the log scale switch re-draws the loss axis with log ticks
  await loss.locator('.lanenb-vchart-log input').check();
  await expect(loss).toHaveAttribute('data-ready', 'true');
  // per-rank table and the log's rank filter
  await expect(panel.locator('.lanenb-ranks tbody tr')).toHaveCount(1);
  await panel.locator('select.lanenb-log-filter').selectOption('launcher');
  await expect(panel.locator('.lanenb-log .lanenb-log-line[data-rank="0"]')).toHaveCount(0);
  await panel.locator('select.lanenb-log-filter').selectOption('0');
  await expect(panel.locator('.lanenb-log .lanenb-log-line[data-rank="0"]').first()).toBeVisible();
  await page.screenshot({ path: path.join(SHOTS, 'job-panel.png') });
  // the dark theme: the charts re-draw in Vega's dark theme, the sidebar follows Lab's colours
  await page.theme.setDarkTheme();
  await expect(loss).toHaveAttribute('data-theme', 'dark');
  await expect(loss).toHaveAttribute('data-ready', 'true');
  await page.screenshot({ path: path.join(SHOTS, 'job-panel-dark.png') });
  await page.theme.setLightTheme();
  await expect(loss).toHaveAttribute('data-theme', 'light');
});

test('Stop in the sidebar asks for confirmation and cancels a running job', async ({ page }) => {
  await openSidebar(page);
  // a press whose release the page never sees (a widget that swallowed it) holds the rows
  // still for a moment only: the new job below must still be listed
  await page.locator('#lanenb-sidebar div.lanenb-job[data-job="ui-train"]').dispatchEvent('pointerdown');
  await runInNotebook(
    page,
    'long.ipynb',
    `%load_ext lanenb\njob = %lanetrain --data ${DATA} ${TRAIN} --epochs 500 --timing-every 2 --name ui-long`
  );
  await expectLaunched(page, 'ui-long');
  const item = page.locator('#lanenb-sidebar div.lanenb-job[data-job="ui-long"]');
  await expect(item.locator('.lanenb-chip')).toHaveText('running', { timeout: 60000 });
  // its panel follows the live update stream: new lines, and charts from the state it carries
  await item.locator('.lanenb-job-name').click();
  const panel = page
    .locator('.lanenb-job-panel')
    .filter({ has: page.locator('.lanenb-panel-status', { hasText: /^ui-long/ }) });
  await expect(panel.locator('.lanenb-log')).toContainText(/step \d+\/\d+ loss/, { timeout: 60000 });
  await expect(panel.locator('.lanenb-vchart[data-panel="loss"] g.mark-line path').first()).toBeVisible();
  await expect(panel.locator('.lanenb-chip')).toHaveText('running');
  // the doctor's verdict while it runs, in the panel and the jobs list, and where a step goes
  await expect(panel.locator('.lanenb-verdict')).toHaveText(VERDICT, { timeout: 90000 });
  await expect(panel.locator('.lanenb-vchart[data-panel="breakdown"] g.mark-rect path')).toHaveCount(4, {
    timeout: 30000
  });
  await page.screenshot({ path: path.join(SHOTS, 'job-panel-running.png') });
  await expect(item.locator('.lanenb-job-verdict')).toHaveText(VERDICT, { timeout: 30000 });
  await item.locator('button.lanenb-stop').click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('Stop job "ui-long"?');
  await page.screenshot({ path: path.join(SHOTS, 'stop-dialog.png') });
  await dialog.locator('button.jp-mod-warn').click();
  await expect(item.locator('.lanenb-chip')).toHaveText('cancelled', { timeout: 60000 });
  await expect(panel.locator('.lanenb-chip')).toHaveText('cancelled'); // from its stream
  await expect(panel.locator('button.lanenb-stop')).toBeHidden();
  // the kernel that launched it sees the same outcome
  await page.activity.activateTab('long.ipynb');
  await page.notebook.setCell(0, 'code', 'print("kernel sees", job.status().state.value)');
  await page.notebook.runCell(0, true);
  await expect(page.locator('.jp-OutputArea-output').first()).toContainText('kernel sees cancelled');
});

test('two snapshots are diffed and one restored from the sidebar', async ({ page }) => {
  await openSidebar(page);
  const group = page.locator('#lanenb-sidebar .lanenb-snap-group[data-job="ui-train"]');
  await expect(group).toBeVisible({ timeout: 30000 });
  const snaps = group.locator('.lanenb-snapshot');
  expect(await snaps.count()).toBeGreaterThanOrEqual(2);
  // short ids, sizes and relative dates
  await expect(snaps.first().locator('.lanenb-snapshot-id')).toHaveText(/^[0-9a-f]{8}$/);
  await expect(snaps.first().locator('.lanenb-snap-when')).toHaveText(/ago|just now/);
  await page.screenshot({ path: path.join(SHOTS, 'sidebar.png') });
  // pick two (keyboard: Space on a focused checkbox), then Diff
  await snaps.nth(0).locator('input.lanenb-snap-pick').focus();
  await page.keyboard.press('Space');
  await snaps.nth(1).locator('input.lanenb-snap-pick').check();
  const diff = page.locator('#lanenb-sidebar button.lanenb-diff-button');
  await expect(diff).toBeEnabled();
  await diff.click();
  const diffDialog = page.locator('.jp-Dialog');
  await expect(diffDialog.locator('.lanenb-diff-summary')).toHaveText(/added|removed|changed/);
  await page.screenshot({ path: path.join(SHOTS, 'snapshot-diff.png') });
  await diffDialog.locator('button.jp-mod-accept').click();
  const snap = snaps.first();
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
