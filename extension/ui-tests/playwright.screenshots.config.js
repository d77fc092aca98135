// The README's screenshots (docs/images): a real 2-rank run in JupyterLab + Chromium, taken by
// scripts/docs_screenshots.sh; the same set-up as the UI tests, never run by CI's tests.
const base = require('./playwright.config.js');

module.exports = { ...base, testDir: './screenshots', timeout: 900000 };
