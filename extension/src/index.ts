import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';
import { LabIcon } from '@jupyterlab/ui-components';

import { JobPanel } from './panel';
import { LaneSidebar } from './sidebar';
import { widgetPlugin } from './widget';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><g class="jp-icon3" fill="#616161">' +
  '<path d="M4 22 9 2h2L6 22zM20 22 15 2h-2l5 20z"/><rect x="11" y="4" width="2" height="3"/>' +
  '<rect x="11" y="10" width="2" height="3"/><rect x="11" y="16" width="2" height="4"/></g></svg>';

export const laneIcon = new LabIcon({ name: 'lanenb:lane', svgstr: ICON_SVG });

const OPEN_JOB = 'lanenb:open-job';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'lanenb:sidebar',
  description: 'Lane training: lanenb jobs and snapshots beside the notebook.',
  autoStart: true,
  requires: [ILabShell],
  optional: [ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    labShell: ILabShell,
    restorer: ILayoutRestorer | null
  ) => {
    const tracker = new WidgetTracker<MainAreaWidget<JobPanel>>({
      namespace: 'lanenb-job'
    });
    app.commands.addCommand(OPEN_JOB, {
      label: args => `Open lanenb job ${args.name ?? ''}`,
      execute: args => {
        const name = String(args.name);
        const open = tracker.find(w => w.content.jobName === name);
        if (open) {
          labShell.activateById(open.id);
          return open;
        }
        const widget = new MainAreaWidget({ content: new JobPanel(name) });
        widget.id = `lanenb-job-${name}`;
        widget.title.label = `Job ${name}`;
        widget.title.icon = laneIcon;
        void tracker.add(widget);
        labShell.add(widget, 'main');
        labShell.activateById(widget.id);
        return widget;
      }
    });
    const sidebar = new LaneSidebar(name => {
      void app.commands.execute(OPEN_JOB, { name });
    });
    sidebar.title.icon = laneIcon;
    labShell.add(sidebar, 'left', { rank: 600 });
    if (restorer) {
      restorer.add(sidebar, 'lanenb-sidebar');
      void restorer.restore(tracker, {
        command: OPEN_JOB,
        args: w => ({ name: w.content.jobName }),
        name: w => w.content.jobName
      });
    }
    console.log('JupyterLab extension lanenb is activated!');
  }
};

export default [plugin, widgetPlugin];
