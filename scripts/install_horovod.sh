#!/usr/bin/env bash
# Build Horovod 0.28.1 against the installed torch.
#
# Why a script: Horovod 0.28.1 (latest release) pins C++14 while torch >= 2.1 needs C++17
# (fixed upstream in horovod#3998, never released). We unpack the sdist, switch the two
# CMakeLists.txt to C++17 and build without isolation against the torch already installed.
# Debian's cmake is required: pip's cmake 4 rejects gloo's cmake_minimum_required.
set -euo pipefail
PY=${PYTHON:-python3}
VERSION=0.28.1

if "$PY" -c "import horovod.torch as h; assert h.mpi_built() and h.gloo_built()" 2>/dev/null; then
  echo "horovod $VERSION already built with MPI and Gloo"; exit 0
fi
"$PY" -c "import torch, numpy" || { echo "install torch and numpy first" >&2; exit 1; }
command -v cmake >/dev/null || { echo "cmake missing: apt-get install -y cmake" >&2; exit 1; }
command -v mpicxx >/dev/null || { echo "Open MPI dev files missing: apt-get install -y openmpi-bin libopenmpi-dev" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m pip download --no-deps --no-binary :all: --no-build-isolation -d "$work" "horovod==$VERSION" >/dev/null
tar -xzf "$work"/horovod-$VERSION.tar.gz -C "$work"
src="$work/horovod-$VERSION"
for f in "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"; do
  sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$f"
  grep -q 'set(CMAKE_CXX_STANDARD 17)' "$f" || { echo "C++17 patch did not apply to $f" >&2; exit 1; }
done
"$PY" -m pip install -q "cloudpickle" "psutil" "pyyaml" "packaging" "cffi>=1.4.0"
env HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
    HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=${HOROVOD_CPU_OPERATIONS:-MPI} \
    HOROVOD_CMAKE=$(command -v cmake) MAKEFLAGS="-j$(nproc)" \
    "$PY" -m pip install --no-build-isolation --no-deps --no-cache-dir "$src"
"$PY" -c "import horovod.torch as h; print('horovod', h.__version__ if hasattr(h,'__version__') else '', 'mpi', h.mpi_built(), 'gloo', h.gloo_built())"
