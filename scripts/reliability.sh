#!/usr/bin/env bash
# The long version of CI's reliability gates, for a local run before a release: every libFuzzer
# target for RF_FUZZ_SECONDS (default 300) each, then the pipeline soak for RF_SOAK_SECONDS
# (default 600) and the memory-bound test. Prints executions per target and the soak's RSS
# figures (see docs/reliability.md). A crash leaves its input in build/fuzz-findings/<target>/:
# add it to fuzz/corpus/<target>/ with the fix.
#
#   RF_FUZZ_SECONDS=300 RF_SOAK_SECONDS=600 bash scripts/reliability.sh
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
FUZZ_SECONDS=${RF_FUZZ_SECONDS:-300}
SOAK_SECONDS=${RF_SOAK_SECONDS:-600}
TARGETS=(record_reader example checkpoint image_probe image_decode manifest index)

cmake --preset fuzz >/dev/null
for target in "${TARGETS[@]}"; do
  cmake --build build/fuzz -j "$JOBS" --target "${target}_fuzzer"
done
for target in "${TARGETS[@]}"; do
  work=build/fuzz-findings/$target
  mkdir -p "$work/corpus"
  cp -n "fuzz/corpus/$target"/* "$work/corpus/" 2>/dev/null || true
  if ! "./build/fuzz/${target}_fuzzer" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" >"$work/log" 2>&1; then
    tail -n 40 "$work/log"
    echo "${target}_fuzzer: failing input kept under $work"
    exit 1
  fi
  echo "${target}_fuzzer ${FUZZ_SECONDS}s: $(grep -E "stat::number_of_executed_units" "$work/log")"
done

cmake --preset release >/dev/null
cmake --build build/release -j "$JOBS" --target recordflow_tests
RF_SOAK_SECONDS=$SOAK_SECONDS ./build/release/recordflow_tests --gtest_brief=1 \
    --gtest_filter='SoakTest.*:MemoryBoundTest.*'
