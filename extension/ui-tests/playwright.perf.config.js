// The browser half of bench/notebook_view.py: the same JupyterLab + Chromium set-up as the UI
// tests (playwright.config.js), other test folder, run only by the bench (never by CI's tests).
const base = require('./playwright.config.js');

module.exports = { ...base, testDir: './perf', timeout: 600000 };
