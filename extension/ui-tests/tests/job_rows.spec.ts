// The jobs list reads whole at JupyterLab's default sidebar width, in a real JupyterLab and
// Chromium: the finished runs recorded by tests/browser/test_lab_job_rows.py (a healthy one and
// an input-bound one, whose verdict is the longest line the doctor writes) show their headline
// ("0.941 test · best.pt, epoch 9") and verdict in full, wrapped at spaces, never cut by an
// ellipsis or hidden past the sidebar's edge.
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const JOBS = (process.env.LANENB_UI_ROWS || '').split(',').filter(Boolean);
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';

test.use({ autoGoto: true });
test.skip(JOBS.length === 0, 'run by tests/browser/test_lab_job_rows.py, which records the runs first');

interface IFit {
  text: string;
  scrollWidth: number;
  clientWidth: number;
  scrollHeight: number;
  clientHeight: number;
  right: number;
  sidebarRight: number;
  lines: number;
}

test('a job row shows its whole headline and verdict at the default sidebar width', async ({ page }) => {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  const sidebar = page.locator('#lanenb-sidebar');
  const width = (await sidebar.boundingBox())?.width ?? 0;
  console.log(`sidebar width ${width}px`);
  expect(width).toBeGreaterThan(150); // JupyterLab's default: nothing here resizes it
  expect(width).toBeLessThan(400);

  for (const job of JOBS) {
    const item = sidebar.locator(`div.lanenb-job[data-job="${job}"]`);
    await expect(item.locator('.lanenb-chip')).toHaveText('succeeded');
    const headline = item.locator('.lanenb-job-accuracy');
    const verdict = item.locator('.lanenb-job-verdict');
    await expect(headline).toHaveText(/^0\.9\d\d test · best\.pt, epoch 9$/);
    await expect(verdict).toHaveText(/^(healthy|input-bound): /);
    for (const part of [headline, verdict]) {
      const fit: IFit = await part.evaluate(node => {
        const box = node.getBoundingClientRect();
        const range = document.createRange();
        range.selectNodeContents(node);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        return {
          text: node.textContent ?? '',
          scrollWidth: node.scrollWidth,
          clientWidth: node.clientWidth,
          scrollHeight: node.scrollHeight,
          clientHeight: node.clientHeight,
          right: box.right,
          sidebarRight: document.getElementById('lanenb-sidebar')!.getBoundingClientRect().right,
          lines: tops.size
        };
      });
      // nothing hidden: no ellipsis or clipped overflow, inside the sidebar
      expect(fit.scrollWidth, `${job}: "${fit.text}" is cut`).toBeLessThanOrEqual(fit.clientWidth);
      expect(fit.scrollHeight, `${job}: "${fit.text}" is cut`).toBeLessThanOrEqual(fit.clientHeight);
      expect(fit.right, `${job}: "${fit.text}" runs past the sidebar`).toBeLessThanOrEqual(fit.sidebarRight);
      if (part === verdict && fit.text.startsWith('input-bound')) {
        expect(fit.lines).toBeGreaterThan(1); // too long for one line: wrapped, not cut
      }
    }
    // wrapped at spaces: no word of the headline or the verdict is split over two lines
    for (const part of [headline, verdict]) {
      const split: string[] = await part.evaluate(node => {
        const broken: string[] = [];
        const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
        for (let text = walker.nextNode(); text; text = walker.nextNode()) {
          const value = text.textContent ?? '';
          for (const word of value.matchAll(/\S+/g)) {
            const range = document.createRange();
            range.setStart(text, word.index ?? 0);
            range.setEnd(text, (word.index ?? 0) + word[0].length);
            const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
            if (tops.size > 1) {
              broken.push(word[0]);
            }
          }
        }
        return broken;
      });
      expect(split).toEqual([]);
    }
  }
  const panel = await sidebar.evaluate(node => ({ scroll: node.scrollWidth, client: node.clientWidth }));
  expect(panel.scroll).toBeLessThanOrEqual(panel.client); // no sideways scrolling either
  await sidebar.screenshot({ path: path.join(SHOTS, 'job-rows.png') });
});
