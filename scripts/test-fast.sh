#!/usr/bin/env bash
# The fast tier: every test that starts no process or server (no mpirun job, no training run, no
# Jupyter server, no restic repository, no Kubernetes emulator with its fake operator, no browser).
# Run it on every change; run the whole suite (python3 -m pytest -q) before a submission.
#
# Which tests those are is decided at collection, in tests/conftest.py (tests/support/fast_tier.py
# lists the fixtures and markers): they are marked `process`, and this tier is -m "not process".
# Extra arguments go to pytest (a folder, -x, -k ...).
set -euo pipefail
cd "$(dirname "$0")/.."

# Open MPI refuses to run as root without these (containers, CI); tests/conftest.py sets them too
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

start=$(date +%s)
status=0
python3 -m pytest -q -p no:cacheprovider -m "not process" "$@" || status=$?
echo "fast tier: $(( $(date +%s) - start )) s on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
exit "$status"
