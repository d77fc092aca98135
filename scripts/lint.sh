#!/usr/bin/env bash
# The lint and type gate: ruff and mypy on the Python side (rules and settings, with the reasons,
# in pyproject.toml), ESLint and tsc on the JupyterLab extension. Run by .ci/run before the tests;
# run it yourself before a commit. Exits non-zero at the first gate that finds something.
#
#   PYTHON  interpreter with lanenb[dev] installed (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# jlpm is a console script of that environment (as in scripts/build_labextension.sh)
PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
export PATH

echo "==> ruff check"
"$PY" -m ruff check lanenb trainer tests bench scripts
echo "==> mypy (lanenb, trainer/lanenb_trainer)"
"$PY" -m mypy

# The extension's gates (ESLint with typescript-eslint, tsc --noEmit; rules in
# extension/eslint.config.mjs). Its node_modules come from scripts/build_labextension.sh (setup.sh
# runs it).
echo "==> extension: eslint"
(cd extension && jlpm run lint)
echo "==> extension: tsc --noEmit"
(cd extension && jlpm run typecheck)
echo "==> lint gate clean"
