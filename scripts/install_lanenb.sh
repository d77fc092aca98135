#!/usr/bin/env bash
# Install lanenb into the current Python environment with its JupyterLab side: build the lab
# extension, pip install the package, make Jupyter find both extensions, register the
# "lanenb" kernel. Run by scripts/setup.sh and binder/postBuild (one set of install steps).
#
#   scripts/install_lanenb.sh [PIP_TARGET]     default ".[dev]", installed editable (pip -e)
#   PYTHON  interpreter (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TARGET=${1:-.[dev]}

bash scripts/build_labextension.sh
echo "==> pip install -e $TARGET"
"$PY" -m pip install -q -e "$TARGET"
# An editable install does not copy the wheel's data files (share/jupyter/labextensions,
# etc/jupyter): link the built extension and the server-extension config into the environment,
# as the JupyterLab extension template's development install does.
"$PY" -m jupyter labextension develop --overwrite . >/dev/null
PREFIX=$("$PY" -c 'import sys; print(sys.prefix)')
mkdir -p "$PREFIX/etc/jupyter/jupyter_server_config.d"
cp jupyter-config/server-config/lanenb.json "$PREFIX/etc/jupyter/jupyter_server_config.d/lanenb.json"
# papermill and JupyterLab run notebooks with the kernel named in them: lanenb, this interpreter.
# A name of our own: "--name python3" would replace the user's default Python 3 kernel with this
# environment (JUPYTER_DATA_DIR, when set, says where --user puts it).
"$PY" -m ipykernel install --user --name lanenb --display-name "Python 3 (lanenb)" >/dev/null
