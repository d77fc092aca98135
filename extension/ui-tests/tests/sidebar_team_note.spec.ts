// The Team section without a cluster, in a real JupyterLab and Chromium started by
// tests/browser/test_lab_sidebar_fit.py with KUBECONFIG naming no file: opened, it says that no
// cluster is configured and how to connect one, as a neutral note: not in the error colour, no
// literal backticks, nothing about a `kubeconfig=` argument (there is none in a sidebar).
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const ON = process.env.LANENB_UI_NO_CLUSTER || '';
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';

test.use({ autoGoto: true });
test.skip(!ON, 'run by tests/browser/test_lab_sidebar_fit.py, which starts JupyterLab without a cluster');

test('the Team section without a cluster is a neutral note on how to connect one', async ({ page }) => {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  await page.locator('#lanenb-sidebar button.lanenb-team-toggle').click();
  const body = page.locator('#lanenb-sidebar .lanenb-team-body');
  await expect(body).not.toHaveText(/reading the cluster/, { timeout: 30000 });
  await expect(body).toContainText(/no Kubernetes cluster is configured/i);
  await expect(body).toContainText(/kube\/config|KUBECONFIG/);
  const text = (await body.textContent()) ?? '';
  expect(text).not.toContain('`');
  expect(text).not.toContain('kubeconfig=');
  await expect(body.locator('[data-kind="error"]')).toHaveCount(0);
  // not in the theme's error colour
  const colours = await body.evaluate(node => {
    const probe = document.createElement('span');
    probe.style.color = 'var(--jp-error-color1)';
    document.body.appendChild(probe);
    const error = getComputedStyle(probe).color;
    probe.remove();
    const used = [...node.querySelectorAll<HTMLElement>('*')].map(n => getComputedStyle(n).color);
    return { error, used };
  });
  expect(colours.used).not.toContain(colours.error);
  await page.locator('#lanenb-sidebar').screenshot({ path: path.join(SHOTS, 'team-note.png') });
});
