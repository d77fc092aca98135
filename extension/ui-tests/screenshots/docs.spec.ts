// The docs' pictures (docs/images): the quickstart's 2-rank run launched from a cell with
// notebooks/01-quickstart.ipynb's recipe (10 epochs, lr 0.02, warm-up 10, 128x320; its 200 frames
// made by scripts/docs_screenshots.sh), so the pictures show a run that learns; its live view
// (hovering the loss) and the sidebar with its job panel. Written to $LANENB_ARTIFACTS; the script
// copies them only when the run reached test accuracy 0.9 (scripts/docs_screenshots_check.py).
import { expect, galata, test } from '@jupyterlab/galata';
import * as path from 'path';

const OUT = process.env.LANENB_ARTIFACTS || 'test-results';
const DATA = process.env.LANENB_UI_DATA as string;

test.use({
  viewport: { width: 1440, height: 1000 },
  // the cell's long %lanetrain line wrapped, so the picture shows it from its start
  mockSettings: {
    ...galata.DEFAULT_SETTINGS,
    '@jupyterlab/notebook-extension:tracker': { codeCellConfig: { lineWrap: true } }
  }
});

// the quickstart notebook's %lanetrain flags (tests/docs/test_docs_screenshots.py checks they agree),
// with the run's name for the script and timing windows often enough for the doctor's verdict
const RECIPE =
  '--processes 2 --gpus 0 --batch-size 4 --epochs 10 --engine auto --img-height 128 --img-width 320 ' +
  '--lr 0.02 --warmup-steps 10 --log-every 5 --val-batch-size 16';

test('the docs screenshots of the quickstart run', async ({ page }) => {
  await page.notebook.createNew('demo.ipynb');
  await page.notebook.setCell(
    0,
    'code',
    `%load_ext lanenb\njob = %lanetrain --data ${DATA} ${RECIPE} --timing-every 5 --name demo-run`
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
