#!/usr/bin/env bash
# One-shot setup of a fresh Debian/Ubuntu machine for lanenb: system packages (Open MPI, cmake),
# torch, the lanenb package with its test extras, and Horovod built against that torch.
#
# Environment knobs:
#   TORCH_SPEC            pip requirement for torch (default torch==2.13.0, a CPU build on the dev
#                         machines; on a GPU box use the CUDA build you want).
#   LANENB_SKIP_HOROVOD=1 skip the ~10 min Horovod build (the ddp engine still works).
#   PYTHON                interpreter to install into (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

need_apt=()
command -v mpirun >/dev/null || need_apt+=(openmpi-bin)
[ -e /usr/include/x86_64-linux-gnu/mpi/mpi.h ] || [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] \
  || command -v mpicxx >/dev/null || need_apt+=(libopenmpi-dev)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v restic >/dev/null || need_apt+=(restic)  # the local snapshot store
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)  # tests/multihost: one sshd per simulated worker host
command -v ip >/dev/null || need_apt+=(iproute2)  # ip netns, veth, tc netem (tests/multihost, bench/multihost.py)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> apt-get install ${need_apt[*]}"
  SUDO=(); [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

echo "==> pip install $TORCH_SPEC and lanenb[dev]"
"$PY" -m pip install -q "$TORCH_SPEC" numpy
"$PY" -m pip install -q -e ".[dev]"
# papermill and JupyterLab run notebooks with the kernel named in them: python3
"$PY" -m ipykernel install --user --name python3 >/dev/null

if [ "${LANENB_SKIP_HOROVOD:-0}" != "1" ]; then
  echo "==> Horovod (MPI + Gloo controllers; ~10 min on 2 cores the first time)"
  bash scripts/install_horovod.sh
fi
echo "==> lanenb ready: try 'lanenb notebook quickstart' (or 'lanenb demo' in the console)"
