#!/usr/bin/env bash
# Runs a command with recordflow's loopback test servers up, then stops them (by PID), also on
# failure or Ctrl-C:
#   scripts/servers/with-remote-servers.sh ./build/release/recordflow_tests --gtest_filter='Remote*'
#   KINDS="s3 proxy" scripts/servers/with-remote-servers.sh python bench/remote.py
# The command sees the servers' environment (AWS_*, STORAGE_EMULATOR_HOST, RF_TEST_*; see
# python/tests/remote/servers.py). Data and logs go to a fresh folder under ${TMPDIR:-/tmp},
# printed first and removed at exit unless RF_KEEP_SERVER_DIR=1.
# Exit status: the command's, or 2 when a server cannot start.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
SERVERS="$ROOT/python/tests/remote/servers.py"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rf-remote-servers.XXXXXX")
echo "with-remote-servers: folder $DIR" >&2
cleanup() {
  "$PY" "$SERVERS" stop --dir "$DIR" || true
  [[ "${RF_KEEP_SERVER_DIR:-0}" == 1 ]] || rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
envfile="$DIR/env.sh"
: >"$envfile"
for kind in ${KINDS:-s3 http gcs proxy}; do
  if ! "$PY" "$SERVERS" start "$kind" --dir "$DIR" >>"$envfile"; then
    echo "with-remote-servers: the $kind server cannot start (bash scripts/setup.sh --test)" >&2
    exit 2
  fi
done
# shellcheck disable=SC1090
source "$envfile"
set +e
"$@"
status=$?
set -e
exit $status
