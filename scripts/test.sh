#!/usr/bin/env bash
# Runs every recordflow test on a fresh machine: installs what is needed, checks formatting and
# lint (scripts/lint.sh), builds the C++ library, CLI and tests (CMakePresets.json), runs them
# (also under ASan+UBSan, and the pipeline and threaded tests under TSan), replays and briefly
# runs the fuzz targets, installs the Python package and runs pytest (including the TensorFlow
# compatibility tests, which run TensorFlow itself) and, on a free-threaded CPython 3.13t built
# from source, the thread-path tests of Python map/filter, then builds the self-contained wheel and
# tests it on a clean Debian root filesystem (scripts/wheel.sh, scripts/wheel_test.sh).
#
# Environment: RF_FUZZ_SECONDS (default 15) bounds each libFuzzer run; RF_SOAK_SECONDS (default
# 60) the pipeline soak; RF_SKIP_SANITIZERS=1 skips the sanitizer build; RF_SKIP_WHEEL=1 skips
# the wheel build and its clean-system test (scripts/wheel_test.sh: needs root; the first run
# creates the cached Debian root filesystem, about 5 minutes); RF_SKIP_FREETHREADED=1 skips the
# free-threaded CPython stage (scripts/freethreaded.sh; the first run builds the interpreter).
# Longer local runs of the fuzzers and the soak alone: scripts/reliability.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
JOBS=$(nproc)

# Each stage prints its start as minutes:seconds since the run began, and the run ends with the
# time of every stage (the whole run is meant to stay under an hour on 2 cores).
stage_names=()
stage_starts=()
stage() {
  stage_names+=("$1")
  stage_starts+=("$SECONDS")
  printf '== [%dm%02ds] %s ==\n' $((SECONDS / 60)) $((SECONDS % 60)) "$1"
}
stage_report() {
  local i end
  echo "== Time per stage (s) =="
  for i in "${!stage_names[@]}"; do
    end=${stage_starts[$((i + 1))]:-$SECONDS}
    printf '%6d  %s\n' $((end - stage_starts[i])) "${stage_names[i]}"
  done
  printf '%6d  total\n' "$SECONDS"
}
trap stage_report EXIT

stage "Setup: system packages and Python dependencies (scripts/setup.sh)"

bash scripts/setup.sh --test --wheel

# ccache under every build of this run: the library and CLI objects of the release build are
# the same compile as those of the pip install and of the free-threaded install (same flags; the
# paths are made relative to the checkout), so those two builds reuse them. The cache lives in
# build/ (this run's own: a run's time does not depend on an earlier run) unless CCACHE_DIR is set.
export CCACHE_DIR=${CCACHE_DIR:-$ROOT/build/ccache} CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1
export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
# One name for the compiler in every build (ccache keys on it; CMake's own search finds c++ or
# g++ depending on its version): the presets that need clang name it themselves.
export CC=${CC:-gcc} CXX=${CXX:-g++}
ccache --zero-stats >/dev/null

# The wheel test's clean Debian root filesystem (cached; a first run downloads it, a few
# minutes of network rather than CPU) is made in the background while the builds run.
rootfs_pid=""
if [[ "${RF_SKIP_WHEEL:-0}" != 1 ]]; then
  mkdir -p build
  bash scripts/wheel_test.sh --prepare >build/rootfs.log 2>&1 &
  rootfs_pid=$!
fi

stage "Lint: clang-format and ruff (check only; scripts/lint.sh --fix applies)"
bash scripts/lint.sh

# Every build below is a preset of CMakePresets.json (cmake --list-presets); the same commands
# work by hand.
stage "C++: build and unit tests (Release)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$JOBS"
stage "C++: unit tests (Release), with the S3 and GCS servers up"
# With a real S3 server (SeaweedFS on loopback) and the GCS emulator up, so the S3IntegrationTest
# and GcsIntegrationTest suites run (and fail, not skip, if the emulator is missing).
KINDS="s3 gcs" RF_REQUIRE_REMOTE_SERVERS=1 bash scripts/servers/with-remote-servers.sh ctest --preset release -j "$JOBS"

stage "Soak: epochs and iterator churn for ${RF_SOAK_SECONDS:-60}s; RSS must stay flat"
RF_SOAK_SECONDS="${RF_SOAK_SECONDS:-60}" ./build/release/recordflow_tests --gtest_brief=1 \
    --gtest_filter='SoakTest.*:MemoryBoundTest.*'

stage "clang-tidy over every C++ source of the release build (.clang-tidy; warnings are errors)"
tidy_start=$SECONDS
# Library, CLI, tests, fuzz targets and their replay driver, the example and the C++ bench: every
# file in build/release/compile_commands.json (the Python binding is built by pip, not here).
run-clang-tidy -quiet -j "$JOBS" -p build/release "^$ROOT/(src|tools|fuzz|examples|bench)/.*\.cc$" \
    >build/clang-tidy.log 2>&1 ||
  { grep -E "error:|warning:" -A3 build/clang-tidy.log | head -n 80; exit 1; }
echo "clang-tidy: clean in $((SECONDS - tidy_start))s"

stage "clang -Wthread-safety: the lock annotations of the engine (pipeline, thread pool)"
# Compile-only, and only the annotated objects (RF_THREAD_SAFETY_ANALYSIS sets
# -Werror=thread-safety on them): a few seconds with ccache.
cmake --preset thread-safety >/dev/null
mapfile -t tsa_objects < <(cd build/tsa && ninja -t targets all |
  grep -oE '^CMakeFiles/[^/]+\.dir/src/recordflow/(pipeline|core/thread_pool)[^:]*\.o' | sort -u)
[[ ${#tsa_objects[@]} -gt 0 ]] || { echo "no annotated objects found in build/tsa"; exit 1; }
(cd build/tsa && ninja -j "$JOBS" "${tsa_objects[@]}")

if [[ "${RF_SKIP_SANITIZERS:-0}" != 1 ]]; then
  stage "C++: unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$JOBS"
  stage "C++: run the unit tests under ASan+UBSan"
  ctest --preset asan -j "$JOBS"

  stage "C++: pipeline and threaded tests under ThreadSanitizer"
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "$JOBS"
  stage "C++: run the pipeline and threaded tests under TSan"
  tsan_filter='PipelineTest.*:InterleaveReadAheadTest.*:CheckpointIntegrityTest.*:Stages/BatteryTest.*:ExampleParserTest.*:RecordIndexTest.*:VisionTest.*:SoakTest.*:GlobReliabilityTest.*:MemoryBoundTest.*Exhausted:MemoryBoundTest.BudgetSmaller*'
  # The TSan build compiles only the test files of these suites (RF_TEST_SOURCES_ONLY in
  # CMakePresets.json): it must hold every test the filter picks from the whole suite.
  tsan_tests() {  # binary: the Suite.Test names its filter picks, sorted
    "$1" --gtest_list_tests --gtest_filter="$tsan_filter" |
      awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}' | sort
  }
  if ! diff <(tsan_tests ./build/release/recordflow_tests) <(tsan_tests ./build/tsan/recordflow_tests); then
    echo "the TSan build lacks tests of its filter: add their files to RF_TEST_SOURCES_ONLY"
    exit 1
  fi
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" RF_SOAK_SECONDS=5 \
      ./build/tsan/recordflow_tests --gtest_brief=1 --gtest_repeat=2 --gtest_filter="$tsan_filter"

  stage "Fuzz: each libFuzzer target for ${RF_FUZZ_SECONDS:-15}s (clang, ASan+UBSan), $JOBS at a time"
  cmake --preset fuzz >/dev/null
  # Every fuzz/<target>_fuzzer.cc (CMakeLists.txt: rf_add_fuzzer), built together, then run
  # $JOBS at once (each libFuzzer run is one thread).
  fuzz_targets=()
  for source in fuzz/*_fuzzer.cc; do fuzz_targets+=("$(basename "$source" _fuzzer.cc)"); done
  cmake --build --preset fuzz -j "$JOBS" --target "${fuzz_targets[@]/%/_fuzzer}"
  fuzz_one() {  # target: runs it on a copy of its corpus; a failing input stays in the work folder
    local target=$1 fuzz_work
    fuzz_work=$(mktemp -d)
    mkdir "$fuzz_work/corpus"
    cp "fuzz/corpus/$target"/* "$fuzz_work/corpus/"
    if ! "./build/fuzz/${target}_fuzzer" -max_total_time="${RF_FUZZ_SECONDS:-15}" \
          -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$fuzz_work/" \
          "$fuzz_work/corpus" >"$fuzz_work/log" 2>&1; then
      tail -n 60 "$fuzz_work/log"
      echo "${target}_fuzzer found a failing input (kept in $fuzz_work): add it to fuzz/corpus/$target"
      return 1
    fi
    echo "${target}_fuzzer: $(grep -E "stat::number_of_executed_units" "$fuzz_work/log")"
    rm -rf "$fuzz_work"
  }
  fuzz_pids=()
  fuzz_failed=0
  for target in "${fuzz_targets[@]}"; do
    fuzz_one "$target" >"build/fuzz/$target.run.log" 2>&1 &
    fuzz_pids+=($!)
    if [[ ${#fuzz_pids[@]} -ge $JOBS ]]; then
      wait "${fuzz_pids[0]}" || fuzz_failed=1
      fuzz_pids=("${fuzz_pids[@]:1}")
    fi
  done
  for pid in "${fuzz_pids[@]}"; do wait "$pid" || fuzz_failed=1; done
  for target in "${fuzz_targets[@]}"; do cat "build/fuzz/$target.run.log"; done
  [[ $fuzz_failed == 0 ]] || exit 1
fi

stage "Python: install the package and run pytest"
$PY -m pip install -q --disable-pip-version-check --no-build-isolation "$ROOT"
stage "Python: pytest"
cd "$ROOT/python/tests"
# The remote-storage tests start their servers once per run; one that cannot start fails here.
RF_REQUIRE_REMOTE_SERVERS=1 $PY -m pytest -q -p no:cacheprovider --durations=20 "$ROOT/python/tests"

if [[ "${RF_SKIP_FREETHREADED:-0}" != 1 ]]; then
  stage "Python on free-threaded CPython 3.13t: map/filter on threads without the GIL"
  # Builds the interpreter once into ~/.cache/recordflow (about 6 min cold on 2 cores), then
  # installs recordflow into its venv and runs python/tests/test_freethreaded.py and the
  # thread-path tests of test_map_workers.py (scripts/freethreaded.sh). Bounded against hangs.
  cd "$ROOT"
  timeout 1800 bash scripts/freethreaded.sh
fi

echo "ccache: $(ccache --print-stats | awk -F'\t' '$1 ~ /^(direct_cache_hit|preprocessed_cache_hit|cache_miss)$/ {printf "%s=%s ", $1, $2}')"

if [[ "${RF_SKIP_WHEEL:-0}" != 1 ]]; then
  stage "Wheel: self-contained (auditwheel), installed and smoke-tested on a clean Debian 12"
  cd "$ROOT"
  # Reuses the build of the pip install above (build-py/), so only the repair is new work.
  RF_WHEEL_NO_ISOLATION=1 bash scripts/wheel.sh
  # (a failed background preparation is retried by wheel_test.sh itself)
  wait "$rootfs_pid" || echo "wheel_test --prepare failed: $(tail -n 5 build/rootfs.log)"
  cat build/rootfs.log
  bash scripts/wheel_test.sh
fi
