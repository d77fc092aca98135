// A job's main-area panel: status line, Stop, charts (loss, throughput, utilisation,
// validation accuracy) and the live log, read from the same resumable update stream as
// the notebook view (Job.poll cursors).
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import { api } from './api';
import { lineChart } from './charts';
import { confirmStop } from './sidebar';

const MAX_LOG_LINES = 2000;

export class JobPanel extends Widget {
  constructor(readonly jobName: string) {
    super();
    this.id = `lanenb-job-${jobName}`;
    this.addClass('lanenb-job-panel');
    this.title.label = `Job ${jobName}`;
    this.title.closable = true;
    this._status = document.createElement('div');
    this._status.className = 'lanenb-panel-status';
    this._stop = document.createElement('button');
    this._stop.className = 'lanenb-stop jp-mod-styled jp-mod-warn';
    this._stop.textContent = 'Stop';
    this._stop.onclick = async () => {
      if (await confirmStop(jobName)) {
        void this._poll.refresh();
      }
    };
    const head = document.createElement('div');
    head.className = 'lanenb-panel-head';
    head.append(this._status, this._stop);
    this._charts = document.createElement('div');
    this._charts.className = 'lanenb-charts';
    this._log = document.createElement('pre');
    this._log.className = 'lanenb-log';
    this.node.append(head, this._charts, this._log);
    this._poll = new Poll({
      auto: true,
      factory: () => this.tick(),
      frequency: { interval: 1000, backoff: true, max: 20000 },
      name: `lanenb:job:${jobName}`,
      standby: 'when-hidden'
    });
  }

  dispose(): void {
    this._poll.dispose();
    super.dispose();
  }

  private async tick(): Promise<void> {
    if (!this._final) {
      const batch = await api.updates(this.jobName, this._cursor);
      this._cursor = batch.cursor;
      this.appendLog(batch.updates.map(u => u.display).filter(Boolean) as string[]);
      if (batch.status) {
        this._state = batch.status.state;
      }
      this._final = batch.final;
    }
    const now = Date.now();
    if (this._final ? !this._chartsFinal : now - this._chartsAt > 3000) {
      this._chartsAt = now;
      this._chartsFinal = this._final;
      await this.drawCharts();
    }
    this._stop.hidden = this._final;
    if (this._final && this._chartsFinal) {
      await this._poll.stop();
    }
  }

  private appendLog(lines: string[]): void {
    if (lines.length === 0) {
      return;
    }
    const stick =
      this._log.scrollTop + this._log.clientHeight >= this._log.scrollHeight - 4;
    this._lines.push(...lines);
    if (this._lines.length > MAX_LOG_LINES) {
      this._lines.splice(0, this._lines.length - MAX_LOG_LINES);
    }
    this._log.textContent = this._lines.join('\n');
    if (stick) {
      this._log.scrollTop = this._log.scrollHeight;
    }
  }

  private async drawCharts(): Promise<void> {
    const m = await api.metrics(this.jobName);
    const acc = m.accuracy === null ? '' : ` · accuracy ${m.accuracy.toFixed(4)}`;
    const steps = m.total_steps ? ` · step ${m.step}/${m.total_steps}` : '';
    this._status.textContent = `${this.jobName}: ${this._state || m.state}${steps}${acc}`;
    this._status.dataset.state = this._state || m.state;
    const charts: HTMLElement[] = [];
    const loss = m.series.loss;
    charts.push(lineChart('loss', loss?.x ?? [], loss?.y ?? []));
    const ips = m.series.images_per_s;
    if (ips) {
      charts.push(lineChart('images/s', ips.x, ips.y));
    }
    const val = m.epochs.val_accuracy;
    if (val) {
      charts.push(lineChart('val accuracy', val.x, val.y));
    }
    const rank0 = m.system['0'];
    const util = rank0?.gpu_util ?? rank0?.cpu_percent;
    if (util) {
      charts.push(
        lineChart(rank0.gpu_util ? 'GPU util % (rank 0)' : 'CPU % (rank 0)', util.x, util.y)
      );
    }
    this._charts.replaceChildren(...charts);
  }

  private _cursor: string | null = null;
  private _final = false;
  private _state = '';
  private _chartsAt = 0;
  private _chartsFinal = false;
  private readonly _lines: string[] = [];
  private readonly _status: HTMLDivElement;
  private readonly _stop: HTMLButtonElement;
  private readonly _charts: HTMLDivElement;
  private readonly _log: HTMLPreElement;
  private readonly _poll: Poll;
}
