#!/usr/bin/env bash
# The lint and type gate: ruff and mypy on the Python side (rules and settings, with the reasons,
# in pyproject.toml), ESLint and tsc on the JupyterLab extension. Run by .ci/run before the tests;
# run it yourself before a commit. Exits non-zero at the first gate that finds something.
#
#   PYTHON  interpreter with lanenb[dev] installed (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

echo "==> ruff check"
"$PY" -m ruff check lanenb trainer tests bench scripts
echo "==> mypy (lanenb, trainer/lanenb_trainer)"
"$PY" -m mypy

# The extension's gates, when its package.json defines them (they are jlpm scripts: eslint, tsc).
has_script() {
  node -e 'const s = require("./extension/package.json").scripts || {}; process.exit(s[process.argv[1]] ? 0 : 1)' "$1"
}
for script in lint typecheck; do
  if has_script "$script"; then
    echo "==> jlpm --cwd extension run $script"
    jlpm --cwd extension run "$script"
  fi
done
echo "==> lint gate clean"
