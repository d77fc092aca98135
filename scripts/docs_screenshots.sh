#!/usr/bin/env bash
# The docs site's screenshots (docs/images) from a real run: JupyterLab + Debian's Chromium via Galata
# (extension/ui-tests/screenshots), the quickstart's 2-rank run (notebooks/01-quickstart.ipynb's recipe:
# 200 synthetic frames, 10 epochs, lr 0.02, warm-up 10, 128x320) on synthetic data; copies them to
# docs/images only when that run learned (test accuracy >= 0.9, scripts/docs_screenshots_check.py),
# else says so and saves nothing. About 3 minutes on 2 cores. Needs what scripts/setup.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
# the quickstart notebook's data: synthesize(data_dir, 200, seed=0, width=640, height=360, test_fraction=0.2)
python3 -m lanenb data synth --out "$tmp/data" --frames 200 --seed 0 --width 640 --height 360 \
  --test-fraction 0.2 --quiet >/dev/null
mkdir -p "$tmp/root" "$tmp/out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd extension && LANENB_HOME="$tmp/home" LANENB_UI_DATA="$tmp/data" LANENB_UI_PORT="$port" \
  LANENB_ARTIFACTS="$tmp/out" JUPYTERLAB_GALATA_ROOT_DIR="$tmp/root" PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CI=1 \
  jlpm playwright test --config ui-tests/playwright.screenshots.config.js)
# the spec's run is named demo-run; a local job's run dir is $LANENB_HOME/runs/NAME
python3 scripts/docs_screenshots_check.py "$tmp/home/runs/demo-run"
cp "$tmp/out/live-view.png" "$tmp/out/lab-sidebar.png" docs/images/
echo "docs/images/live-view.png and lab-sidebar.png updated"
