#!/usr/bin/env bash
# The README's screenshots from a real run: JupyterLab + Debian's Chromium via Galata
# (extension/ui-tests/screenshots), a 2-rank run on synthetic data; copies them to docs/images.
# About 5 minutes on 2 cores. Needs what scripts/setup.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
python3 -m lanenb data synth --out "$tmp/data" --frames 80 --seed 0 >/dev/null
mkdir -p "$tmp/root" "$tmp/out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd extension && LANENB_HOME="$tmp/home" LANENB_UI_DATA="$tmp/data" LANENB_UI_PORT="$port" \
  LANENB_ARTIFACTS="$tmp/out" JUPYTERLAB_GALATA_ROOT_DIR="$tmp/root" PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CI=1 \
  jlpm playwright test --config ui-tests/playwright.screenshots.config.js)
cp "$tmp/out/live-view.png" "$tmp/out/lab-sidebar.png" docs/images/
echo "docs/images/live-view.png and lab-sidebar.png updated"
