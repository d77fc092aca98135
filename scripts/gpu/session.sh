#!/usr/bin/env bash
# The whole command of a GPU session (run THERE, from the repo root, as one device `run` with
# carry [".gpu-carry"], filled here by scripts/gpu/carry.sh):
#
#   bash scripts/gpu/session.sh [bench/gpu_check.py arguments]
#
# 1. Open MPI from .gpu-carry/debs unpacked into a private root (dpkg -x, never into /) and
#    relocated there (PATH, LD_LIBRARY_PATH, OPAL_PREFIX and friends); shared memory + TCP on
#    loopback only, root allowed, no ssh needed.
# 2. .gpu-carry/whl installed into a private site (pip --target, no index), PYTHONPATH set to it,
#    trainer/ and the repo; `lanenb` on PATH runs `python3 -m lanenb`.
# 3. With the notebook group: the lanenb Jupyter kernel registered (papermill can run notebooks/).
# 4. One screen of environment summary, then `python3 bench/gpu_check.py "$@"` (unbuffered).
#
# Everything is tee'd into "$OUT/gpu_check.log" ($OUT exported; .gpu-out/ when unset). A step that
# fails says so and the later ones still run; the exit status is gpu_check's.
#
# Knobs (defaults): LANENB_GPU_KIT (.gpu-carry), LANENB_MPI_ROOT (/opt/lanenb-mpi),
# LANENB_SITE (/tmp/site), PYTHON (python3).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD
KIT=${LANENB_GPU_KIT:-$REPO/.gpu-carry}
MPI_ROOT=${LANENB_MPI_ROOT:-/opt/lanenb-mpi}
SITE=${LANENB_SITE:-/tmp/site}
OUT=${OUT:-$REPO/.gpu-out}
export OUT
mkdir -p "$OUT" || exit 1
PY=$(command -v "${PYTHON:-python3}") || { echo "[session] no ${PYTHON:-python3} on PATH" >&2; exit 1; }
LIBDIR=$MPI_ROOT/usr/lib/x86_64-linux-gnu
# the system's copy of these wins when it has one: they are no part of MPI, and an older copy
# first on LD_LIBRARY_PATH could shadow the newer one that other programs there were built for
GENERIC_LIBS=(libudev.so.1 libatomic.so.1 libnuma.so.1 libnl-3.so.200 libnl-route-3.so.200)

problems=()
say() { printf '[session] %s\n' "$*"; }
failed() { say "FAILED: $*"; problems+=("$*"); }
elapsed() { printf '%ss' "$((SECONDS - $1))"; }

setup_mpi() {
  local t0=$SECONDS debs=("$KIT"/debs/*.deb) deb lib
  if [ ! -e "${debs[0]}" ]; then
    failed "Open MPI: no debs in $KIT/debs (run scripts/gpu/carry.sh here first); mpirun checks will fail"
    return
  fi
  mkdir -p "$MPI_ROOT" || { failed "Open MPI: cannot create $MPI_ROOT"; return; }
  for deb in "${debs[@]}"; do
    dpkg -x "$deb" "$MPI_ROOT" || failed "Open MPI: dpkg -x $(basename "$deb")"
  done
  # Debian names them through update-alternatives, which dpkg -x does not run
  if ! { ln -sf orterun "$MPI_ROOT/usr/bin/mpirun" && ln -sf orterun "$MPI_ROOT/usr/bin/mpiexec"; }; then
    failed "Open MPI: mpirun/mpiexec links in $MPI_ROOT/usr/bin"
  fi
  for lib in "${GENERIC_LIBS[@]}"; do
    if ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$lib "; then
      rm -f "$LIBDIR/$lib" "$LIBDIR/$lib".* "$MPI_ROOT/lib/x86_64-linux-gnu/$lib" "$MPI_ROOT/lib/x86_64-linux-gnu/$lib".*
    fi
  done
  mkdir -p "$LIBDIR/hwloc"  # hwloc's plugins (X11, OpenCL probes) are not carried: an empty folder
  export PATH="$MPI_ROOT/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$LIBDIR:$MPI_ROOT/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Debian's build (prefix /usr, libdir under /usr/lib/x86_64-linux-gnu/openmpi, sysconfdir
  # /etc/openmpi) moved under $MPI_ROOT: every installdir spelled out, so none points into /usr
  export OPAL_PREFIX="$MPI_ROOT/usr" OPAL_EXEC_PREFIX="$MPI_ROOT/usr" OPAL_BINDIR="$MPI_ROOT/usr/bin"
  export OPAL_LIBDIR="$LIBDIR/openmpi/lib" OPAL_PKGLIBDIR="$LIBDIR/openmpi/lib/openmpi3"
  export OPAL_DATAROOTDIR="$MPI_ROOT/usr/share" OPAL_DATADIR="$MPI_ROOT/usr/share"
  export OPAL_PKGDATADIR="$MPI_ROOT/usr/share/openmpi" OPAL_SYSCONFDIR="$MPI_ROOT/etc/openmpi"
  export OPAL_LIBEXECDIR="$MPI_ROOT/usr/libexec" OPAL_INCLUDEDIR="$LIBDIR/openmpi/include"
  # PMIx (an external libpmix2, prefix /usr/lib/x86_64-linux-gnu/pmix2) and hwloc likewise
  export PMIX_PREFIX="$LIBDIR/pmix2" PMIX_EXEC_PREFIX="$LIBDIR/pmix2" PMIX_LIBDIR="$LIBDIR/pmix2/lib"
  export PMIX_PKGLIBDIR="$LIBDIR/pmix2/lib/pmix" PMIX_DATAROOTDIR="$LIBDIR/pmix2/share"
  export PMIX_DATADIR="$LIBDIR/pmix2/share" PMIX_PKGDATADIR="$LIBDIR/pmix2/share/pmix"
  export HWLOC_PLUGINS_PATH="$LIBDIR/hwloc"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # one machine, no RDMA hardware: shared memory + TCP on loopback; no ssh needed to start
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx,pt2pt
  export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_plm=isolated
  export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_rmaps_base_oversubscribe=1
  if [ "$(command -v mpirun)" != "$MPI_ROOT/usr/bin/mpirun" ]; then
    failed "Open MPI: mpirun resolves to $(command -v mpirun || echo nothing), not $MPI_ROOT/usr/bin/mpirun"
  elif ! mpirun -np 2 "$PY" "$REPO/scripts/gpu/mpi_selftest.py" "$MPI_ROOT"; then
    failed "Open MPI: the 2-rank self-test (scripts/gpu/mpi_selftest.py) failed"
  fi
  say "Open MPI unpacked into $MPI_ROOT ($(elapsed "$t0"))"
}

setup_wheels() {
  local t0=$SECONDS wheels=("$KIT"/whl/*.whl)
  export PYTHONPATH="$SITE:$REPO/trainer:$REPO${PYTHONPATH:+:$PYTHONPATH}"
  mkdir -p "$SITE/bin"
  export PATH="$SITE/bin:$PATH"
  printf '#!/bin/sh\nexec "%s" -m lanenb "$@"\n' "$PY" > "$SITE/bin/lanenb" && chmod +x "$SITE/bin/lanenb"
  if [ ! -e "${wheels[0]}" ]; then
    failed "wheels: none in $KIT/whl (tensorboardX, simplejpeg missing: ranks write no TensorBoard files)"
    return
  fi
  if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
      --target "$SITE" "${wheels[@]}"; then
    say "${#wheels[@]} wheels installed into $SITE ($(elapsed "$t0"))"
  else
    failed "wheels: pip install --target $SITE"
  fi
}

setup_kernel() {
  local t0=$SECONDS
  # found, not imported: a broken import should fail loudly below, not read as "not carried"
  if ! "$PY" -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('ipykernel') and u.find_spec('papermill')))"
  then
    say "notebook group not carried (no ipykernel/papermill): no Jupyter kernel registered"
    return
  fi
  export JUPYTER_PATH="$SITE/jupyter/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
  export JUPYTER_PLATFORM_DIRS=1 MPLBACKEND=Agg
  if "$PY" -m ipykernel install --name lanenb --display-name "Python 3 (lanenb)" --prefix "$SITE/jupyter" >/dev/null; then
    say "lanenb kernel registered in $SITE/jupyter ($(elapsed "$t0"))"
  else
    failed "notebook: ipykernel install --prefix $SITE/jupyter"
  fi
}

summary() {
  say "---------------------------------------------------------------- environment"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi -L || failed "nvidia-smi -L"
  else
    say "nvidia-smi: not on PATH"
  fi
  "$PY" - <<'EOF' || failed "python3 environment summary"
import importlib, shutil, subprocess, sys
import torch
cuda = torch.cuda.is_available()
print(f"python {sys.version.split()[0]} ({sys.executable})")
print(f"torch {torch.__version__}  CUDA {torch.version.cuda}  cuda available {cuda}  "
      f"devices {torch.cuda.device_count()}  cudnn {torch.backends.cudnn.version()}  "
      f"nccl {'.'.join(map(str, torch.cuda.nccl.version())) if cuda else '-'}")
if cuda:
    print(f"GPU 0: {torch.cuda.get_device_name(0)}  capability {torch.cuda.get_device_capability(0)}")
for mod in ("triton", "tensorboardX", "simplejpeg", "cv2", "pynvml", "papermill", "ipykernel",
            "ipywidgets", "vl_convert", "horovod", "lanenb", "lanenb_trainer"):
    try:
        m = importlib.import_module(mod)
        where = getattr(m, "__file__", "") or ""
        print(f"  {mod:15s} {getattr(m, '__version__', 'present'):12s} {where}")
    except Exception as exc:
        print(f"  {mod:15s} MISSING ({type(exc).__name__}: {exc})")
mpirun = shutil.which("mpirun")
version = subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout.splitlines()[0] \
    if mpirun else "-"
print(f"  mpirun          {version}  {mpirun or 'MISSING'}")
print(f"  restic          {shutil.which('restic') or 'MISSING (notebook group not carried)'}")
EOF
  say "steps that failed: ${#problems[@]}${problems[*]:+ (${problems[*]})}"
  say "---------------------------------------------------------------- bench/gpu_check.py $*"
}

main() {
  local t0=$SECONDS code
  say "repo $REPO  kit $KIT  OUT $OUT  $(date -u +%FT%TZ)"
  if [ -f "$KIT/manifest.txt" ]; then
    grep '^#\|^carried' "$KIT/manifest.txt"
  else
    failed "no $KIT/manifest.txt: the kit was not carried (run carry [\".gpu-carry\"])"
  fi
  setup_mpi
  setup_wheels
  setup_kernel
  summary "$@"
  PYTHONUNBUFFERED=1 "$PY" bench/gpu_check.py "$@"
  code=$?
  say "bench/gpu_check.py exited $code; session $(elapsed "$t0")"
  return "$code"
}

main "$@" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
