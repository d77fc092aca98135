// The notebook's LiveCharts widget (lanenb/notebook/charts_widget.py): the same Vega-Lite
// panels and the same renderer (vegacharts.ts) as the sidebar's job panel. The model holds the
// panel specs and the latest rows per dataset; a view turns each change into Vega change sets.
import {
  DOMWidgetModel,
  DOMWidgetView,
  IJupyterWidgetRegistry
} from '@jupyter-widgets/base';
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';

import { ChartGrid, Rows, Spec } from './vegacharts';
import { MODULE_VERSION } from './version';

// the Python side's _model_module / _model_module_version
export const MODULE_NAME = 'lanenb';
export { MODULE_VERSION };

export class LiveChartsModel extends DOMWidgetModel {
  defaults() {
    return {
      ...super.defaults(),
      _model_name: 'LiveChartsModel',
      _model_module: MODULE_NAME,
      _model_module_version: MODULE_VERSION,
      _view_name: 'LiveChartsView',
      _view_module: MODULE_NAME,
      _view_module_version: MODULE_VERSION,
      specs: [],
      rows: {}
    };
  }
}

export class LiveChartsView extends DOMWidgetView {
  render(): void {
    this.el.classList.add('lanenb-livecharts');
    this._grid = new ChartGrid();
    this.el.appendChild(this._grid.node);
    this.specsChanged();
    this.listenTo(this.model, 'change:specs', this.specsChanged);
    this.listenTo(this.model, 'change:rows', this.rowsChanged);
  }

  remove(): void {
    this._grid?.dispose();
    super.remove();
  }

  private specsChanged(): void {
    this._grid?.setSpecs(this.model.get('specs') as Spec[]);
    this.rowsChanged();
  }

  private rowsChanged(): void {
    void this._grid?.setData(this.model.get('rows') as Rows);
  }

  private _grid: ChartGrid | null = null;
}

export const widgetPlugin: JupyterFrontEndPlugin<void> = {
  id: 'lanenb:widgets',
  description: 'The LiveCharts widget of lanenb live views (interactive Vega-Lite charts).',
  autoStart: true,
  requires: [IJupyterWidgetRegistry],
  activate: (_app: JupyterFrontEnd, registry: IJupyterWidgetRegistry) => {
    registry.registerWidget({
      name: MODULE_NAME,
      version: MODULE_VERSION,
      exports: { LiveChartsModel, LiveChartsView }
    });
  }
};
