// The README's pictures: a 2-rank, 4-epoch run launched from a cell, its live view (hovering the
// loss), and the sidebar with its job panel. Written to $LANENB_ARTIFACTS.
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const OUT = process.env.LANENB_ARTIFACTS || 'test-results';
const DATA = process.env.LANENB_UI_DATA as string;

test.use({ viewport: { width: 1440, height: 1000 } });

test('README screenshots of a real 2-rank run', async ({ page }) => {
  await page.notebook.createNew('demo.ipynb');
  await page.notebook.setCell(
    0,
    'code',
    `%load_ext lanenb\njob = %lanetrain --data ${DATA} --processes 2 --batch-size 4 --epochs 4 ` +
      '--img-height 128 --img-width 320 --log-every 1 --timing-every 5 --name demo-run'
  );
  await page.notebook.runCell(0, false);
  const view = page.locator('.jp-OutputArea .lanenb-livecharts');
  await expect(view.locator('.lanenb-vchart[data-panel="loss"] svg')).toBeVisible({ timeout: 120000 });
  await expect(page.locator('.jp-OutputArea').first()).toContainText('succeeded', { timeout: 600000 });
  await page.waitForTimeout(3000);
  const loss = view.locator('.lanenb-vchart[data-panel="loss"]');
  await loss.scrollIntoViewIfNeeded();
  const box = await loss.locator('svg path.background').first().boundingBox();
  if (box) {
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.5);
  }
  await page.waitForTimeout(500);
  await page.screenshot({ path: path.join(OUT, 'live-view.png') });
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await tab.click();
  const item = page.locator('#lanenb-sidebar div.lanenb-job[data-job="demo-run"]');
  await item.locator('.lanenb-job-name').click();
  const panel = page.locator('.lanenb-job-panel');
  await expect(panel.locator('.lanenb-vchart[data-panel="breakdown"] svg')).toBeVisible({ timeout: 60000 });
  await page.waitForTimeout(2000);
  await page.screenshot({ path: path.join(OUT, 'lab-sidebar.png') });
});
