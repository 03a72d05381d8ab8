#!/usr/bin/env bash
# ctest install.find_package: installs the configured build into a scratch prefix, builds
# examples/cpp/find_package (a separate project using find_package(recordflow)) against it and
# runs the result on the golden Examples.
#   cmake/test_find_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
test -f "$work/prefix/include/recordflow/pipeline/dataset.h"
test -f "$work/prefix/include/recordflow/version.h"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$src/examples/cpp/find_package" -B "$work/consumer" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
"$work/consumer/train_loop" "$src/testdata/golden/examples.tfrecord" --batch 3 --epochs 1
