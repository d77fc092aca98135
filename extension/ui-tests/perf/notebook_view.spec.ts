// Frame times of the notebook's LiveCharts widget under a long run: 100k loss steps and
// 4 ranks x 10k system samples already charted, then 40 updates from the kernel (250 new steps
// each, 4 a second) while the page records every animation frame and long task. Written to
// $LANENB_ARTIFACTS/notebook-view-perf.json for bench/notebook_view.py to print.
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

const OUT = process.env.LANENB_ARTIFACTS || 'test-results';

const SETUP = `
import math, time, json
from IPython.display import display
from lanenb.analysis.runstate import RunState
from lanenb.notebook.charts_widget import LiveCharts
from lanenb_trainer.events import Event
s = RunState()
def feed(a, b):
    for i in range(a, b):
        s.fold(Event("step", 0, float(i), data={"step": i, "epoch": 0, "total_steps": 200000,
               "loss": 2 * math.exp(-i / 30000) + 0.05 * math.sin(i), "lr": 0.01, "images_per_s": 50.0 + i % 7}))
        if i % 10 == 0:
            for r in range(4):
                s.fold(Event("system", r, float(i), data={"cpu_percent": 90.0, "rss_mb": 400.0,
                       "gpu_util": 60.0 + (i * (r + 1)) % 30, "gpu_mem_mb": 9000.0 + r}))
feed(1, 100001)
w = LiveCharts(s)
display(w)`;

const UPDATES = `
costs, sizes = [], []
step = 100001
for _ in range(40):
    feed(step, step + 250)
    step += 250
    t = time.perf_counter()
    w.show_state(s)
    costs.append(time.perf_counter() - t)
    sizes.append(len(json.dumps(w.rows)))  # what the update sent, measured outside the timed part
    time.sleep(0.25)
costs.sort()
print("KERNEL " + json.dumps({"update_ms_p50": costs[20] * 1000, "update_ms_max": costs[-1] * 1000,
      "bytes_per_update": sum(sizes) / len(sizes), "rows": {k: len(v) for k, v in w.rows.items()}}))`;

/** A cell of one line (the editor would re-indent typed Python): the code, base64-encoded, exec'd. */
function oneLine(source: string): string {
  return `exec(__import__('base64').b64decode('${Buffer.from(source).toString('base64')}').decode())`;
}

test('LiveCharts frame times with 100k steps and 4 ranks x 10k samples', async ({ page }) => {
  await page.notebook.createNew('perf.ipynb');
  await page.notebook.setCell(0, 'code', oneLine(SETUP));
  await page.notebook.runCell(0, true);
  const charts = page.locator('.lanenb-livecharts .lanenb-vchart[data-ready="true"]');
  await expect(charts).toHaveCount(5, { timeout: 120000 });
  // the update cell is added before the recording starts: adding a cell builds an editor, which
  // is JupyterLab's work, not the charts'
  await page.notebook.addCell('code', oneLine(UPDATES));
  await page.waitForTimeout(1000);
  await page.evaluate(() => {
    const w = window as any;
    w.__frames = [];
    w.__long = [];
    let last = performance.now();
    const tick = (t: number) => {
      w.__frames.push(t - last);
      last = t;
      if (!w.__stop) {
        requestAnimationFrame(tick);
      }
    };
    requestAnimationFrame(tick);
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) {
        w.__long.push(e.duration);
      }
    }).observe({ type: 'longtask', buffered: false });
  });
  await page.notebook.runCell(1, true);
  const kernelLine = await page.locator('.jp-OutputArea-output').filter({ hasText: 'KERNEL' }).first().textContent();
  const result = await page.evaluate(() => {
    const w = window as any;
    w.__stop = true;
    const frames = (w.__frames as number[]).slice(1).sort((a, b) => a - b);
    const pick = (q: number) => frames[Math.min(frames.length - 1, Math.floor(q * frames.length))];
    // each chart's own run (LiveChart.flush): which panel costs a frame
    const runs: Record<string, number[]> = {};
    for (const m of performance.getEntriesByName('lanenb-chart-run')) {
      const panel = String((m as PerformanceMeasure).detail);
      (runs[panel] = runs[panel] ?? []).push(m.duration);
    }
    const chart_runs = Object.fromEntries(
      Object.entries(runs).map(([panel, d]) => {
        d.sort((a, b) => a - b);
        return [panel, { runs: d.length, ms_p50: d[Math.floor(d.length / 2)], ms_max: d[d.length - 1] }];
      })
    );
    return {
      chart_runs,
      frames: frames.length,
      frame_ms_p50: pick(0.5),
      frame_ms_p95: pick(0.95),
      frame_ms_max: frames[frames.length - 1],
      frames_over_50ms: frames.filter(f => f > 50).length,
      long_tasks: (w.__long as number[]).length,
      long_task_ms_max: Math.max(0, ...(w.__long as number[]))
    };
  });
  const kernel = JSON.parse((kernelLine ?? '').slice((kernelLine ?? '').indexOf('{')));
  fs.writeFileSync(path.join(OUT, 'notebook-view-perf.json'), JSON.stringify({ browser: result, kernel }, null, 1));
  await page.screenshot({ path: path.join(OUT, 'notebook-view-perf.png') });
});
