// An opened sweep fits the sidebar, in a real JupyterLab and Chromium: the sweep recorded by
// tests/browser/test_lab_sidebar_fit.py (four trials, four searched parameters) opens under its
// row at the default sidebar width; its trials table scrolls inside its own box, and every chart,
// legends included, is drawn within the sidebar's width: nothing is cut at the right edge and the
// sidebar itself never scrolls sideways.
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const SWEEP = process.env.LANENB_UI_FIT_SWEEP || '';
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';

test.use({ autoGoto: true });
test.skip(!SWEEP, 'run by tests/browser/test_lab_sidebar_fit.py, which records the sweep first');

test('an opened sweep, its table, charts and legends fit the sidebar width', async ({ page }) => {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  const sidebar = page.locator('#lanenb-sidebar');
  const item = sidebar.locator(`div.lanenb-sweep[data-sweep="${SWEEP}"]`);
  await item.locator('button.lanenb-sweep-name').click();
  const detail = item.locator('.lanenb-sweep-detail');
  await expect(detail.locator('table.lanenb-trials tbody tr.lanenb-trial')).toHaveCount(4);
  const charts = detail.locator('.lanenb-vchart');
  await expect(charts).toHaveCount(5);
  for (let i = 0; i < 5; i++) {
    await expect(charts.nth(i)).toHaveAttribute('data-ready', 'true', { timeout: 30000 });
  }
  await page.waitForTimeout(500); // a chart's legend is laid out after its rows
  const edge = await sidebar.evaluate(node => {
    const box = node.getBoundingClientRect();
    return box.left + node.clientWidth; // inside the vertical scrollbar, if any
  });
  // the table's box ends inside the sidebar (the table scrolls in it)
  const table = await detail.locator('.lanenb-trials-box').evaluate(node => node.getBoundingClientRect().right);
  expect(table).toBeLessThanOrEqual(edge + 0.5);
  // every chart and every legend ends inside the sidebar
  const rights = await detail.evaluate(node =>
    [...node.querySelectorAll('.lanenb-vchart')].map(chart => {
      const svg = chart.querySelector('svg')!;
      const legends = [...chart.querySelectorAll('g.role-legend')];
      return {
        panel: (chart as HTMLElement).dataset.panel ?? '',
        chart: chart.getBoundingClientRect().right,
        svg: svg.getBoundingClientRect().right,
        legend: Math.max(0, ...legends.map(l => l.getBoundingClientRect().right))
      };
    })
  );
  for (const r of rights) {
    console.log(`${r.panel}: chart ${r.chart}, svg ${r.svg}, legend ${r.legend}, sidebar ${edge}`);
    expect(r.chart, `${r.panel} runs past the sidebar`).toBeLessThanOrEqual(edge + 0.5);
    expect(r.svg, `${r.panel} is cut`).toBeLessThanOrEqual(edge + 0.5);
    expect(r.legend, `${r.panel}'s legend is cut`).toBeLessThanOrEqual(edge + 0.5);
  }
  const scroll = await sidebar.evaluate(node => ({ scroll: node.scrollWidth, client: node.clientWidth }));
  expect(scroll.scroll).toBeLessThanOrEqual(scroll.client); // no sideways scrolling of the sidebar
  const charted = detail.locator('.lanenb-vcharts');
  const grid = await charted.evaluate(node => ({ scroll: node.scrollWidth, client: node.clientWidth }));
  expect(grid.scroll).toBeLessThanOrEqual(grid.client); // nor of the charts
  await sidebar.screenshot({ path: path.join(SHOTS, 'sweep-fit.png') });
});
