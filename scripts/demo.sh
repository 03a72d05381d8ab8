#!/usr/bin/env bash
# The main job on built-in demo data: installs recordflow, generates a small ImageNet-like image
# folder from bundled photos, converts it to TFRecord shards with `recordflow convert`, verifies
# and reads them back; then writes a few thousand records, verifies and indexes them with the
# CLI, reads them back, and prints throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/setup.sh
$PY -m pip install -q --disable-pip-version-check --no-build-isolation .
out=${1:-$(mktemp -d /tmp/recordflow-demo.XXXXXX)}
cd /tmp && $PY -m recordflow.demo "$out"
