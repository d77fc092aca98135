// The job panel's charts in a real JupyterLab and Chromium, over the short finished run recorded by
// tests/browser/test_lab_sidebar_fit.py (system samples over 2 s): a plain wheel over a chart
// scrolls the panel and leaves the chart alone; Ctrl + wheel zooms, and zoomed out as far as the
// wheel goes the time axis stays inside the data (never negative seconds); the time axis counts
// whole seconds, each once (not "0 0 0 1 1 1"); no axis reads "0.000000"; the log's rank filter
// is JupyterLab's select (a caret), not a box that looks like a text field.
import { expect, test } from '@jupyterlab/galata';
import type { Locator } from '@playwright/test';
import * as path from 'path';

const JOB = process.env.LANENB_UI_ZOOM || '';
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';

test.use({ autoGoto: true });
test.skip(!JOB, 'run by tests/browser/test_lab_sidebar_fit.py, which records the run first');

/** The time axis's labels of a chart (the axis titled "seconds since the first sample"): the
 *  visible ones, or (`where`) every label with its position, which any zoom or pan moves. */
async function timeLabels(chart: Locator, where = false): Promise<string[]> {
  return chart.evaluate((node, where) => {
    const axes = [...node.querySelectorAll('g.role-axis')];
    const axis = axes.find(a => a.querySelector('g.role-axis-title')?.textContent === 'seconds since the first sample');
    const labels = axis ? [...axis.querySelectorAll('g.role-axis-label text')] : [];
    if (where) {
      return labels.map(t => `${t.textContent}@${t.getAttribute('transform')}`);
    }
    return labels.filter(t => getComputedStyle(t).opacity !== '0').map(t => t.textContent ?? '').filter(Boolean);
  }, where);
}

/** A label as a number ("−2,000" -> -2000: d3 writes a minus sign, not a hyphen). */
function seconds(label: string): number {
  return Number(label.replace(/,/g, '').replace('\u2212', '-'));
}

test('a wheel scrolls the panel, Ctrl + wheel zooms within the data, whole-second ticks', async ({ page }) => {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  await page.locator(`#lanenb-sidebar div.lanenb-job[data-job="${JOB}"] .lanenb-job-name`).click();
  const panel = page.locator('.lanenb-job-panel');
  await expect(panel).toBeVisible();
  const cpu = panel.locator('.lanenb-vchart[data-panel="cpu"]');
  await expect(cpu).toHaveAttribute('data-ready', 'true', { timeout: 30000 });
  await expect.poll(() => timeLabels(cpu), { timeout: 15000 }).toContain('2');

  // a 2 s run: whole seconds, each once (every label drawn, hidden or not: no repeats at all)
  expect(await timeLabels(cpu)).toEqual(['0', '1', '2']);
  const all = (await timeLabels(cpu, true)).map(l => l.split('@')[0]).filter(l => l !== '');
  expect(all).toEqual([...new Set(all)]);
  const before = await timeLabels(cpu, true);
  // no axis of any chart says 0.000000
  const texts = await panel.locator('.lanenb-vchart svg text').allTextContents();
  expect(texts.filter(t => /\d\.0{5,}/.test(t))).toEqual([]);

  // a plain wheel over the chart scrolls the panel; the chart stays as it was
  await panel.evaluate(node => (node.scrollTop = 0));
  await cpu.scrollIntoViewIfNeeded();
  const top = await panel.evaluate(node => node.scrollTop);
  const box = (await cpu.locator('svg').boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, 120);
  await expect.poll(() => panel.evaluate(node => node.scrollTop)).toBeGreaterThan(top);
  await page.waitForTimeout(300);
  expect(await timeLabels(cpu, true)).toEqual(before); // not zoomed

  // Ctrl + wheel zooms: in, then out as far as the wheel goes, and never past the data's 0..2 s
  await cpu.scrollIntoViewIfNeeded();
  const at = (await cpu.locator('svg').boundingBox())!;
  await page.mouse.move(at.x + at.width / 2, at.y + at.height / 2);
  await page.keyboard.down('Control');
  await page.mouse.wheel(0, -600);
  await page.keyboard.up('Control');
  await expect.poll(() => timeLabels(cpu, true)).not.toEqual(before);
  await page.keyboard.down('Control');
  for (let i = 0; i < 6; i++) {
    await page.mouse.wheel(0, 1500);
  }
  await page.keyboard.up('Control');
  await page.waitForTimeout(500);
  const zoomedOut = await timeLabels(cpu);
  console.log(`zoomed out: ${zoomedOut.join(' ')}`);
  const values = zoomedOut.map(seconds);
  expect(values.length).toBeGreaterThan(1);
  expect(Math.min(...values)).toBeGreaterThanOrEqual(0);
  expect(Math.max(...values)).toBeLessThanOrEqual(2);
  await page.screenshot({ path: path.join(SHOTS, 'panel-zoomed.png') });

  // the rank filter: JupyterLab's select, with its caret
  const filter = panel.locator('select.lanenb-log-filter');
  await expect(filter).toBeVisible();
  const wrapper = panel.locator('.jp-HTMLSelect.jp-DefaultStyle:has(select.lanenb-log-filter)');
  await expect(wrapper).toHaveCount(1);
  await expect(wrapper.locator('svg')).toBeVisible();
  await filter.selectOption('launcher');
  await expect(filter).toHaveValue('launcher');
});
