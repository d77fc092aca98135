// Galata (Playwright for JupyterLab) with Debian's Chromium: no browser download, no video or
// trace (both need Playwright's own ffmpeg/browsers). Started by tests/browser/test_lab_extension.py,
// which sets the port, the root directory, LANENB_HOME and the dataset.
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const port = process.env.LANENB_UI_PORT || '8888';
const artifacts = process.env.LANENB_ARTIFACTS || 'test-results';

module.exports = {
  ...baseConfig,
  testDir: './tests',
  outputDir: artifacts,
  reporter: [['list']],
  retries: 0,
  workers: 1,
  timeout: 240000,
  expect: { timeout: 30000 },
  use: {
    ...baseConfig.use,
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: {
      executablePath: process.env.LANENB_CHROMIUM || '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-dev-shm-usage']
    },
    video: 'off',
    trace: 'off',
    screenshot: 'only-on-failure'
  },
  webServer: {
    command: `jupyter lab --config ${__dirname}/jupyter_server_test_config.py --allow-root`,
    url: `http://127.0.0.1:${port}/lab`,
    timeout: 120000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe'
  }
};
