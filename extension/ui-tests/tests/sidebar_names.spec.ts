// Long job names in the sidebar, in a real JupyterLab and Chromium: three sweep trials recorded by
// tests/browser/test_lab_sidebar_fit.py whose names differ only at the end
// ("lane-sweep-20261128-101500-trial-1" ...) are cut in the middle at the default sidebar width,
// so each row shows its own end; the whole name is the tooltip.
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const NAMES = (process.env.LANENB_UI_NAMES || '').split(',').filter(Boolean);
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';

test.use({ autoGoto: true });
test.skip(NAMES.length === 0, 'run by tests/browser/test_lab_sidebar_fit.py, which records the jobs first');

test('long job names keep their start and their distinctive end', async ({ page }) => {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  const seen: string[] = [];
  for (const name of NAMES) {
    const button = page.locator(`#lanenb-sidebar div.lanenb-job[data-job="${name}"] .lanenb-job-name`);
    await expect(button).toBeVisible();
    expect(await button.textContent()).toBe(name); // reads and copies whole
    expect(await button.getAttribute('title')).toContain(name); // the tooltip: the whole name
    // which characters of the name can be seen: those inside the button's box and not behind an
    // ellipsis (a clipped text node's characters still have boxes, past the clip edge)
    const shown = await button.evaluate(node => {
      const box = node.getBoundingClientRect();
      const parts: string[] = [];
      const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
      for (let text = walker.nextNode(); text; text = walker.nextNode()) {
        const holder = text.parentElement!.getBoundingClientRect();
        const value = text.textContent ?? '';
        for (let i = 0; i < value.length; i++) {
          const range = document.createRange();
          range.setStart(text, i);
          range.setEnd(text, i + 1);
          const r = range.getBoundingClientRect();
          const inside = r.right <= Math.min(box.right, holder.right) + 0.5 && r.left >= box.left - 0.5;
          parts.push(inside ? value[i] : '…');
        }
      }
      return parts.join('').replace(/…+/g, '…');
    });
    console.log(`${name} shows as ${shown}`);
    expect(shown.startsWith('lane-')).toBe(true);
    expect(shown.endsWith(name.slice(-'-trial-1'.length))).toBe(true); // its own end, whole
    seen.push(shown);
  }
  expect(new Set(seen).size).toBe(NAMES.length); // no two rows look alike
  await page.locator('#lanenb-sidebar').screenshot({ path: path.join(SHOTS, 'names.png') });
});
