#!/usr/bin/env bash
# Runs recordflow's Python thread-path tests on free-threaded CPython (3.13t, built with
# --disable-gil). No free-threaded interpreter ships on PyPI or in Debian 12, so this builds one
# from Debian's CPython 3.13 source tarball into a cache folder and reuses it on later runs.
#   scripts/freethreaded.sh            build (if not cached) the interpreter and venv, install
#                                      recordflow, run the free-threaded tests
#   scripts/freethreaded.sh --build    only the interpreter and venv (no recordflow, no tests)
# Environment:
#   RF_FT_CACHE   cache folder (default ~/.cache/recordflow); the interpreter goes to
#                 $RF_FT_CACHE/python3.13t, the venv to $RF_FT_CACHE/venv-3.13t
#   RF_FT_JOBS    make -j (default 2)
# Cold: ~6 min on 2 cores (no PGO/LTO, tests of CPython skipped); warm: the recordflow build
# and the tests only. Needs the Debian packages scripts/setup.sh --test installs (libssl-dev,
# zlib1g-dev, libffi-dev, libbz2-dev, liblzma-dev, libsqlite3-dev): pip needs ssl.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${RF_FT_CACHE:-$HOME/.cache/recordflow}
jobs=${RF_FT_JOBS:-2}
version=3.13.5
tarball_url="http://deb.debian.org/debian/pool/main/p/python3.13/python3.13_${version}.orig.tar.xz"
tarball_md5=dbaa8833aa736eddbb18a6a6ae0c10fa
prefix=$cache/python3.13t
venv=$cache/venv-3.13t
only_build=0
[[ "${1:-}" == "--build" ]] && only_build=1

mkdir -p "$cache"
python_bin=$prefix/bin/python3.13t

if [[ ! -x "$python_bin" ]] ||
   ! "$python_bin" -c 'import sys, ssl, zlib; sys.exit(sys._is_gil_enabled())' 2>/dev/null; then
  tarball=$cache/python3.13_${version}.orig.tar.xz
  # A partial or corrupt download is detected by the checksum and fetched again.
  if [[ ! -f "$tarball" ]] || ! echo "$tarball_md5  $tarball" | md5sum -c --quiet - 2>/dev/null; then
    echo "freethreaded: downloading $tarball_url"
    curl -fsSL --retry 3 -o "$tarball.part" "$tarball_url"
    mv "$tarball.part" "$tarball"
  fi
  if ! echo "$tarball_md5  $tarball" | md5sum -c --quiet -; then
    echo "freethreaded: $tarball: md5 mismatch (want $tarball_md5)" >&2
    exit 1
  fi
  src=$cache/src-3.13t
  rm -rf "$src" "$prefix"
  mkdir -p "$src"
  tar -xJf "$tarball" -C "$src" --strip-components=1
  echo "freethreaded: building CPython $version --disable-gil into $prefix (make -j$jobs)"
  (cd "$src" &&
   ./configure --prefix="$prefix" --disable-gil --without-ensurepip --disable-test-modules \
     >"$cache/configure-3.13t.log" 2>&1 &&
   make -j"$jobs" >"$cache/make-3.13t.log" 2>&1 &&
   make altinstall >"$cache/install-3.13t.log" 2>&1) || {
    echo "freethreaded: CPython build failed; see $cache/*-3.13t.log" >&2
    tail -n 30 "$cache/make-3.13t.log" "$cache/install-3.13t.log" 2>/dev/null >&2 || true
    exit 1
  }
  rm -rf "$src"
  # The free-threaded build names its binary python3.13t; the venv needs ssl (pip) and the
  # interpreter must really run without the GIL.
  "$python_bin" -c 'import sys, ssl, zlib, bz2, lzma, ctypes
assert not sys._is_gil_enabled(), "interpreter was built with the GIL"'
  rm -rf "$venv"
fi

if ! "$venv/bin/python" -c 'import numpy, pytest, nanobind, scikit_build_core' 2>/dev/null; then
  # pip from the interpreter's own ensurepip (its bundled wheel: no download).
  rm -rf "$venv"
  "$python_bin" -m venv "$venv"
  # cp313t wheels from PyPI (--only-binary: the newest NumPy that has one; a NumPy release
  # without a cp313t wheel would otherwise be compiled from source for ~30 min); the build
  # tools recordflow's pyproject names.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=numpy \
    numpy "pytest>=7" "scikit-build-core>=0.10" "nanobind>=2.2" "cmake>=3.22" ninja
fi
"$venv/bin/python" -c 'import sys; assert not sys._is_gil_enabled()'
[[ $only_build == 1 ]] && { echo "freethreaded: interpreter and venv ready: $venv"; exit 0; }

echo "freethreaded: installing recordflow into $venv"
# ccache speeds up a rebuild where it is installed; scripts/setup.sh does not install it, so a
# fresh machine builds without it.
launcher=""
if command -v ccache >/dev/null 2>&1; then
  launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
fi
(cd "$root" &&
 CMAKE_ARGS="${CMAKE_ARGS:-} $launcher" \
   "$venv/bin/python" -m pip install -q --no-build-isolation --disable-pip-version-check .)
# (build-py/<wheel tag>/: the cp313t build has a folder of its own beside the GIL build's.)

echo "freethreaded: running the free-threaded tests"
cd "$root/python/tests"
# test_map_workers.py but its torch test (no cp313t torch here) and the two tests of "auto"'s
# choice on a GIL interpreter (without a GIL, "auto" takes threads: test_freethreaded.py).
RF_REQUIRE_FREETHREADED=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  test_freethreaded.py test_map_workers.py \
  -k "not torch_loader and not test_auto_moves_a_slow and not test_auto_uses_processes_only" "$@"
