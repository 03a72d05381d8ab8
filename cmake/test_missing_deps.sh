#!/usr/bin/env bash
# ctest cmake.missing_dependencies: configures the tree with everything under /usr hidden from
# CMake's searches (as on a system without the -dev packages) and checks that the one error
# names every missing dependency with its Debian package.
#   cmake/test_missing_deps.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if cmake -S "$src" -B "$work" -DRF_REQUIRE_ALL=ON -DRF_BUILD_CLI=ON -DRF_BUILD_TESTS=ON \
     "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/" -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
     >"$work/log" 2>&1; then
  echo "configure succeeded with /usr hidden"; exit 1
fi
status=0
for want in "zlib1g-dev" "libisal-dev" "libjpeg62-turbo-dev" "libpng-dev" "libgif-dev" \
            "libwebp-dev" "libcurl4-openssl-dev" "libssl-dev" "libcli11-dev" "libgtest-dev" "missing build dependencies"; do
  grep -q -- "$want" "$work/log" || { echo "the configure error does not name $want"; status=1; }
done
[[ $status == 0 ]] || cat "$work/log"
exit $status
