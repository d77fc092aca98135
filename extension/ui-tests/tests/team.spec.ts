// The sidebar's Team section in a real JupyterLab and Chromium, over the emulated cluster of
// tests/browser/test_lab_team.py (tests/k8s/team_scenario.py, as alice, who may read and stop in
// team-a only): closed at first; opened, it lists team-a's jobs with their users, why the pending
// one waits and the running one's progress, offers Stop only on jobs RBAC lets alice delete, and
// says what it could not read (team-b, the nodes).
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const TEAM = process.env.LANENB_UI_TEAM || '';
const SHOTS = process.env.LANENB_ARTIFACTS || 'test-results';

test.use({ autoGoto: true });
test.skip(!TEAM, 'run by tests/browser/test_lab_team.py, which starts the emulated cluster first');

test('the Team section lists the team-a jobs, why one waits, and what alice cannot read', async ({ page }) => {
  const tab = page.locator('.jp-SideBar [data-id="lanenb-sidebar"]');
  await expect(tab).toBeVisible();
  if (!(await page.locator('#lanenb-sidebar').isVisible())) {
    await tab.click();
  }
  const toggle = page.locator('#lanenb-sidebar button.lanenb-team-toggle');
  await expect(toggle).toHaveAttribute('aria-expanded', 'false');
  await toggle.click();
  await expect(toggle).toHaveAttribute('aria-expanded', 'true');

  const team = page.locator('#lanenb-sidebar .lanenb-team-body');
  const rows = team.locator('.lanenb-team-job');
  await expect(rows).toHaveCount(3);
  const run = team.locator('.lanenb-team-job[data-job="team-a/a-run"]');
  await expect(run.locator('.lanenb-chip')).toHaveText('running');
  await expect(run.locator('.lanenb-team-user')).toHaveText('alice (you)');
  await expect(run.locator('.lanenb-team-facts')).toContainText('team-a · 2 ranks (2x1 GPU)');
  await expect(run.locator('.lanenb-team-facts')).toContainText('50% (ETA 8m 0s)');
  await expect(run.locator('.lanenb-team-facts')).toContainText('GPU 87%');
  await expect(run.locator('button.lanenb-stop')).toHaveCount(1); // alice may delete in team-a

  const wait = team.locator('.lanenb-team-job[data-job="team-a/a-wait"]');
  await expect(wait.locator('.lanenb-team-user')).toHaveText('carol');
  await expect(wait.locator('.lanenb-team-why')).toHaveText('Unschedulable: insufficient nvidia.com/gpu on 2 nodes');
  await expect(wait.locator('.lanenb-team-estimate')).toHaveText(
    "no estimate: the nodes' GPU capacity is not readable"
  );
  const done = team.locator('.lanenb-team-job[data-job="team-a/a-done"]');
  await expect(done.locator('button.lanenb-stop')).toHaveCount(0); // finished: nothing to stop

  const refused = team.locator('.lanenb-team-unreadable');
  await expect(refused.filter({ hasText: 'cannot read MPIJobs in team-b (403)' })).toHaveCount(1);
  await expect(refused.filter({ hasText: 'cannot read nodes across the cluster (403)' })).toHaveCount(1);
  await page.screenshot({ path: path.join(SHOTS, 'team-sidebar.png') });
});
