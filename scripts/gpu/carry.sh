#!/usr/bin/env bash
# Fill .gpu-carry/ (ignored) with what a GPU session needs that the GPU machines' image lacks,
# so that session is one device `run` (carry [".gpu-carry"], command `bash scripts/gpu/session.sh`):
#
#   debs/  Debian 12's Open MPI runtime and the libraries it needs past glibc (apt-get download,
#          no root install here); session.sh unpacks them into a private root there.
#   whl/   cp312 manylinux/py3 wheels of the rank side's needs (tensorboardX, simplejpeg), with
#          every dependency the image lacks (scripts/gpu/image-packages.txt lists what it has).
#   --notebook: also papermill + ipykernel + ipywidgets (and their closure) and Debian's restic
#          (the quickstart's --snapshot), so notebooks/01-quickstart.ipynb can run there.
#   --vl-convert: also vl-convert-python (the run charts' static image; a 32 MiB wheel: with the
#          notebook group that is over the limit, so the guard refuses it; the notebook
#          side keeps the run view's text without it: "no static chart image").
#   manifest.txt: every file with its size; exits 1 when carry + the repo's tracked files
#          exceed LIMIT_MIB (default 60; a device run takes 64 MiB in all).
#
# Run here (Debian 12, pip and apt-get reach their registries). Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
DEST=.gpu-carry
LIMIT_MIB=${LIMIT_MIB:-60}
notebook=0
vlconvert=0
for arg in "$@"; do
  case "$arg" in
    --notebook) notebook=1 ;;
    --vl-convert) notebook=1; vlconvert=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "carry.sh: unknown argument $arg (--notebook, --vl-convert)" >&2; exit 2 ;;
  esac
done

# Open MPI 4.1 (Debian 12) and what its libraries and components link past glibc, libstdc++,
# libgcc and zlib (ldd over libopenmpi3 + openmpi-bin). Left out: openssh-client (remote launch),
# libhwloc-plugins (X11/OpenCL probes), the Fortran/Java bindings' runtimes.
DEBS=(openmpi-bin openmpi-common libopenmpi3 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
      libpmix2 libmunge2 libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libpsm2-2
      libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libatomic1 libudev1)
NOTEBOOK_DEBS=(restic)
# what a rank imports beyond the image (trainer/lanenb_trainer: tensorboard_log, data/tusimple);
# lanenb.launch / contract / jobs and `lanenb train` need nothing the image lacks
WHEELS=(tensorboardX simplejpeg)
# papermill running a python3 kernel, and the notebook side's own imports (IPython, ipywidgets)
NOTEBOOK_WHEELS=(papermill nbclient nbformat ipykernel ipython ipywidgets)
PIP_TARGET=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64
            --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux1_x86_64
            --platform manylinux_2_5_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64
            --platform any)

rm -rf "$DEST"
mkdir -p "$DEST/debs" "$DEST/whl"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

debs=("${DEBS[@]}")
wheels=("${WHEELS[@]}")
if [ "$notebook" = 1 ]; then
  debs+=("${NOTEBOOK_DEBS[@]}")
  wheels+=("${NOTEBOOK_WHEELS[@]}")
fi
[ "$vlconvert" = 1 ] && wheels+=(vl-convert-python)

echo "==> apt-get download (${#debs[@]} packages)"
if ! apt-cache show openmpi-bin >/dev/null 2>&1; then
  apt-get update -qq
fi
(cd "$DEST/debs" && apt-get -o APT::Sandbox::User=root download -qq "${debs[@]}")

echo "==> resolve ${wheels[*]} for CPython 3.12 manylinux x86_64"
"$PY" -m pip install -q --dry-run --ignore-installed --target "$tmp/t" --report "$tmp/report.json" \
  "${PIP_TARGET[@]}" "${wheels[@]}"
mapfile -t picked < <("$PY" scripts/gpu/kit.py pick "$tmp/report.json" scripts/gpu/image-packages.txt)
if [ ${#picked[@]} -eq 0 ]; then
  echo "carry.sh: the resolver picked nothing the image lacks for ${wheels[*]}: check image-packages.txt" >&2
  exit 1
fi
echo "==> pip download --no-deps ${picked[*]}"
"$PY" -m pip download -q --no-deps "${PIP_TARGET[@]}" -d "$DEST/whl" "${picked[@]}"

echo "==> closure: every Requires-Dist is carried or in the image"
"$PY" scripts/gpu/kit.py closure "$DEST/whl" scripts/gpu/image-packages.txt

groups=core
[ "$notebook" = 1 ] && groups+=" notebook"
[ "$vlconvert" = 1 ] && groups+=" vl-convert"
echo "==> manifest ($DEST/manifest.txt)"
over=0
"$PY" scripts/gpu/kit.py manifest "$DEST" . "$LIMIT_MIB" || over=1
{
  echo "# groups: $groups"
  echo "# debs: ${debs[*]}"
  echo "# wheels asked for: ${wheels[*]}"
  cat "$DEST/manifest.txt"
} > "$tmp/m"
cp "$tmp/m" "$DEST/manifest.txt"
[ "$over" = 0 ] || exit 1
echo "==> $DEST ready: run carry [\".gpu-carry\"] with command: bash scripts/gpu/session.sh"
