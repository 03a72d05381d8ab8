#!/usr/bin/env bash
# End-to-end tests of the `recordflow` command. Over 600 lines: one script, so that every case
# shares the fixtures written by Python and the pass/fail tally.
#
#   RECORDFLOW=/path/to/recordflow bash tools/recordflow/cli_test.sh
#
# Test files are written by Python from the byte layout alone (its own CRC32C, no recordflow
# code), so a bug shared by the library's reader and writer cannot hide here. Prints one line
# per failure and, last, "N passed, M failed"; exits non-zero if anything failed.
set -u

: "${RECORDFLOW:?set RECORDFLOW to the recordflow binary}"
RF="$RECORDFLOW"
T="$(mktemp -d "${TMPDIR:-/tmp}/recordflow_cli_test.XXXXXX")"
trap 'rm -rf "$T"' EXIT
# testdata/golden/tfrecord_ref.py: the pure-Python TFRecord framing and protobuf wire pieces the
# Python tests check against too (no recordflow code).
export PYTHONPATH="$(cd "$(dirname "$0")/../../testdata/golden" && pwd)${PYTHONPATH:+:$PYTHONPATH}"

passed=0
failed=0
name=""

# ---- Test data ------------------------------------------------------------------------------
# Five records (one empty). Offsets and framed sizes (16 + payload):
#   0: b"alpha"            offset   0, size  21
#   1: b""                 offset  21, size  16
#   2: b"hello, world"     offset  37, size  28
#   3: bytes(range(256))   offset  65, size 272
#   4: b"\x00\x01\x02\xff" offset 337, size  20      (file: 357 bytes)
python3 - "$T" <<'PY' || { echo "test data generation failed" >&2; exit 1; }
import base64, gzip, os, struct, sys, zlib

from tfrecord_ref import crc32c, frame

out = sys.argv[1]

assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value

payloads = [b"alpha", b"", b"hello, world", bytes(range(256)), b"\x00\x01\x02\xff"]
good = frame(payloads)
offsets, pos = [], 0
for p in payloads:
    offsets.append((pos, 16 + len(p)))
    pos += 16 + len(p)
assert offsets == [(0, 21), (21, 16), (37, 28), (65, 272), (337, 20)], offsets
assert len(good) == 357

def write(name, data, mode="wb"):
    with open(os.path.join(out, name), mode) as f:
        f.write(data)

write("good.tfrecord", good)
write("empty.tfrecord", b"")
write("not_a_record.txt", b"this is just some text, not a TFRecord file\n")
payload_flip = bytearray(good); payload_flip[37 + 12] ^= 0x01   # first payload byte of record 2
write("payload_flip.tfrecord", bytes(payload_flip))
length_flip = bytearray(good); length_flip[65] ^= 0x01          # low length byte of record 3
write("length_flip.tfrecord", bytes(length_flip))
write("truncated.tfrecord", good[:-3])                          # record 4 loses 3 bytes
gz = gzip.compress(good)
write("good.tfrecord.gz", gz)
write("gzip_no_extension.bin", gz)
write("good.tfrecord.zz", zlib.compress(good))
write("truncated.tfrecord.gz", gz[: len(gz) // 2])
# Odd names: JSON output must stay valid for quotes, backslashes and bytes that are not UTF-8.
write(os.fsdecode(os.path.join(os.fsencode(out), b'we"ird\\name\xff.tfrecord')), good)

write("expected.idx", "".join(f"{o} {s}\n" for o, s in offsets), "w")
write("expected.base64", "".join(base64.b64encode(p).decode() + "\n" for p in payloads), "w")
write("expected.hex", "".join(p.hex() + "\n" for p in payloads), "w")
write("expected.raw", b"".join(payloads))
write("expected.record3", payloads[3])
PY

# ---- Helpers ---------------------------------------------------------------------------------
# run ARGS...: runs recordflow; sets $rc, $out and $err (also in $T/out and $T/err).
run() {
  "$RF" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  out="$(tr -d '\000' <"$T/out")"  # raw payloads hold NUL bytes, which bash cannot store
  err="$(cat "$T/err")"
}
pass() { passed=$((passed + 1)); }
fail() {
  failed=$((failed + 1))
  echo "FAIL [$name]: $*" >&2
  echo "  stdout: $(head -c 600 "$T/out")" >&2
  echo "  stderr: $(head -c 600 "$T/err")" >&2
}
expect_rc() { if [[ $rc -eq $1 ]]; then pass; else fail "exit status $rc, expected $1"; fi; }
expect_out() { if [[ "$out" == "$1" ]]; then pass; else fail "stdout is not: $1"; fi; }
expect_out_has() {
  if [[ "$out" == *"$1"* ]]; then pass; else fail "stdout lacks: $1"; fi
}
expect_err_has() {
  if [[ "$err" == *"$1"* ]]; then pass; else fail "stderr lacks: $1"; fi
}
expect_err_empty() { if [[ -z "$err" ]]; then pass; else fail "stderr not empty"; fi; }
expect_same_file() {
  if cmp -s "$1" "$2"; then pass; else fail "$1 differs from $2"; fi
}
# expect_json: stdout is one valid JSON document.
expect_json() {
  if python3 -m json.tool "$T/out" >/dev/null 2>"$T/json_err"; then
    pass
  else
    fail "stdout is not valid JSON: $(cat "$T/json_err")"
  fi
}
# expect_py 'PYTHON': runs PYTHON with `doc` = the parsed JSON stdout (or `lines` = the parsed
# JSON lines); it must assert what it checks.
expect_py() {
  if python3 - "$T/out" >"$T/py_out" 2>&1 <<PY
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
try:
    doc = json.loads(text)
except ValueError:
    doc = None
lines = [json.loads(line) for line in text.splitlines() if line.strip()] if doc is None else None
$1
PY
  then
    pass
  else
    fail "python check failed: $(tail -n 3 "$T/py_out")"
  fi
}

cd "$T" || exit 1

# ---- count -----------------------------------------------------------------------------------
name="count one file"
run count good.tfrecord
expect_rc 0; expect_out "5 good.tfrecord"; expect_err_empty

name="count several files, compression from the extension"
run count good.tfrecord good.tfrecord.gz good.tfrecord.zz empty.tfrecord
expect_rc 0
expect_out "$(printf '5 good.tfrecord\n5 good.tfrecord.gz\n5 good.tfrecord.zz\n0 empty.tfrecord\n15 total')"

name="count, verify, index, inspect, extract: a quoted glob is expanded and sorted; matching nothing is NotFound"
run count 'good.tfrecord*'
expect_rc 0
expect_out "$(printf '5 good.tfrecord\n5 good.tfrecord.gz\n5 good.tfrecord.zz\n15 total')"
run verify '[g]ood.tfrecord.?z'
expect_rc 0; expect_out_has "good.tfrecord.gz"; expect_out_has "good.tfrecord.zz"
run inspect 'go?d.tfrecord'
expect_rc 0
run extract 'nothing-*.tfrecord' "$T/extract-none"
expect_rc 1; expect_err_has "recordflow: NotFound: no files match 'nothing-*.tfrecord'"
for command in count verify index inspect; do
  run "$command" 'nothing-*.tfrecord'
  expect_rc 1; expect_err_has "recordflow: NotFound: no files match 'nothing-*.tfrecord'"
done

name="count --compression overrides the extension"
run count --compression GZIP gzip_no_extension.bin
expect_rc 0; expect_out "5 gzip_no_extension.bin"
run count --compression gzip gzip_no_extension.bin
expect_rc 0; expect_out "5 gzip_no_extension.bin"

name="count a GZIP file read as plain names GZIP in the hint"
run count --compression NONE good.tfrecord.gz
expect_rc 3; expect_err_has "recordflow: DataLoss: "; expect_err_has "GZIP"

name="count --json"
run count --json good.tfrecord good.tfrecord.gz
expect_rc 0; expect_json
expect_py '
f = doc["files"]
assert [x["path"] for x in f] == ["good.tfrecord", "good.tfrecord.gz"], f
assert [x["records"] for x in f] == [5, 5], f
assert [x["compression"] for x in f] == ["NONE", "GZIP"], f
assert all(x["status"] == "ok" for x in f), f
assert doc["total"]["records"] == 10 and doc["total"]["files"] == 2, doc["total"]'

name="count stops at a corrupt payload with DataLoss naming path, offset and record"
run count payload_flip.tfrecord
expect_rc 3
expect_err_has "recordflow: DataLoss: "
expect_err_has "'payload_flip.tfrecord' at byte offset 37 (record index 2)"
expect_err_has "payload CRC mismatch"

name="count --on-corruption skip counts the good records but still exits 3"
run count --on-corruption skip payload_flip.tfrecord
expect_rc 3
expect_out "4 payload_flip.tfrecord (skipped 1 corrupt region, 28 bytes)"
expect_err_has "recordflow: DataLoss: skipped 1 corrupt region (28 bytes) in 'payload_flip.tfrecord'"

name="count --on-corruption skip --json"
run count --json --on-corruption skip payload_flip.tfrecord length_flip.tfrecord good.tfrecord
expect_rc 3; expect_json
expect_py '
f = doc["files"]
assert [x["records"] for x in f] == [4, 4, 5], f
assert [x["corrupt_regions"] for x in f] == [1, 1, 0], f
assert [x["bytes_skipped"] for x in f] == [28, 272, 0], f
assert [x["status"] for x in f] == ["corrupt", "corrupt", "ok"], f
t = doc["total"]
assert (t["records"], t["files_corrupt"], t["files_ok"], t["bytes_skipped"]) == (13, 2, 1, 300), t'

name="count --no-verify does not check payload CRCs"
run count --no-verify payload_flip.tfrecord
expect_rc 0; expect_out "5 payload_flip.tfrecord"

name="count a truncated file"
run count truncated.tfrecord
expect_rc 3; expect_err_has "byte offset 337 (record index 4)"; expect_err_has "truncated"

name="count a file that is not a TFRecord file"
run count not_a_record.txt
expect_rc 3; expect_err_has "Is this a TFRecord file?"

name="count a missing file: exit 1, NotFound, names the path"
run count "$T/missing.tfrecord"
expect_rc 1; expect_err_has "recordflow: NotFound: "; expect_err_has "$T/missing.tfrecord"

name="count keeps going after a failed file; an error outranks data loss"
run count missing.tfrecord payload_flip.tfrecord good.tfrecord
expect_rc 1; expect_out "5 good.tfrecord"$'\n'"5 total"
expect_err_has "missing.tfrecord"; expect_err_has "payload_flip.tfrecord"

name="count --json with a missing file"
run count --json missing.tfrecord good.tfrecord
expect_rc 1; expect_json
expect_py '
f = doc["files"]
assert f[0]["status"] == "error" and f[0]["error"]["code"] == "NotFound", f
assert "missing.tfrecord" in f[0]["error"]["message"], f
assert f[1]["records"] == 5 and doc["total"]["files_failed"] == 1, doc'

name="count --json escapes odd file names"
odd="$(printf 'we"ird\\name\xff.tfrecord')"
run count --json "$odd"
expect_rc 0; expect_json
expect_py '
p = doc["files"][0]["path"]
assert p == "we\"ird\\name\ufffd.tfrecord", repr(p)
assert doc["files"][0]["records"] == 5'

name="count writing to a full device fails with IOError"
"$RF" count good.tfrecord >/dev/full 2>"$T/err"; rc=$?; err="$(cat "$T/err")"; : >"$T/out"
expect_rc 1; expect_err_has "recordflow: IOError: "

# ---- cat -------------------------------------------------------------------------------------
name="cat defaults to base64, one payload per line (empty payload: empty line)"
run cat good.tfrecord
expect_rc 0; expect_same_file "$T/out" expected.base64

name="cat --limit"
run cat --limit 2 good.tfrecord
expect_rc 0
head -n 2 expected.base64 >"$T/expected_slice"
expect_same_file "$T/out" "$T/expected_slice"

name="cat --skip --limit --format hex"
run cat --skip 2 --limit 2 --format hex good.tfrecord
expect_rc 0
head -n 4 expected.hex | tail -n 2 >"$T/expected_slice"
expect_same_file "$T/out" "$T/expected_slice"

name="cat --limit 0 prints nothing"
run cat --limit 0 good.tfrecord
expect_rc 0; expect_out ""

name="cat --skip past the end prints nothing"
run cat --skip 99 good.tfrecord
expect_rc 0; expect_out ""

name="cat --format json: one object per line with index, offset, size, data"
run cat --format json --skip 1 good.tfrecord
expect_rc 0
expect_py '
import base64
assert [l["index"] for l in lines] == [1, 2, 3, 4], lines
assert [l["offset"] for l in lines] == [21, 37, 65, 337], lines
assert [l["size"] for l in lines] == [0, 12, 256, 4], lines
assert base64.b64decode(lines[1]["data"]) == b"hello, world"
assert base64.b64decode(lines[2]["data"]) == bytes(range(256))'

name="cat --json is --format json"
run cat --json --limit 1 good.tfrecord
expect_rc 0
expect_out '{"index":0,"offset":0,"size":5,"data":"YWxwaGE="}'

name="cat --json and --format together is a usage error"
run cat --json --format hex good.tfrecord
expect_rc 2

name="cat --format raw: payload bytes back to back"
run cat --format raw good.tfrecord
expect_rc 0; expect_same_file "$T/out" expected.raw

name="cat --format raw extracts one record exactly"
run cat --format raw --skip 3 --limit 1 good.tfrecord
expect_rc 0; expect_same_file "$T/out" expected.record3

name="cat a GZIP file"
run cat good.tfrecord.gz
expect_rc 0; expect_same_file "$T/out" expected.base64

name="cat stops at corruption after printing the good records"
run cat payload_flip.tfrecord
expect_rc 3
head -n 2 expected.base64 >"$T/expected_slice"
expect_same_file "$T/out" "$T/expected_slice"
expect_err_has "recordflow: DataLoss: "

name="cat --limit stops before the corruption"
run cat --limit 2 payload_flip.tfrecord
expect_rc 0

name="cat --on-corruption skip"
run cat --on-corruption skip --format hex length_flip.tfrecord
expect_rc 3
if [[ "$(wc -l <"$T/out")" -eq 4 ]]; then pass; else fail "expected 4 records"; fi
expect_err_has "skipped 1 corrupt region (272 bytes)"

name="cat a missing file"
run cat missing.tfrecord
expect_rc 1; expect_err_has "recordflow: NotFound: "; expect_err_has "missing.tfrecord"

# ---- verify ----------------------------------------------------------------------------------
name="verify a good file"
run verify good.tfrecord
expect_rc 0
expect_out "good.tfrecord: OK: 5 records ok, 0 corrupt regions, 0 bytes skipped"

name="verify a corrupt payload: exit 3 with the region's offset"
run verify payload_flip.tfrecord
expect_rc 3
expect_out_has "payload_flip.tfrecord: corrupt region at byte offset 37 (record index 2), 28 bytes skipped: payload CRC mismatch"
expect_out_has "payload_flip.tfrecord: CORRUPT: 4 records ok, 1 corrupt region, 28 bytes skipped"
expect_err_has "recordflow: DataLoss: 'payload_flip.tfrecord' has 1 corrupt region"

name="verify a corrupt length: resynchronises at the next record"
run verify length_flip.tfrecord
expect_rc 3
expect_out_has "corrupt region at byte offset 65 (record index 3), 272 bytes skipped: length CRC mismatch"
expect_out_has "CORRUPT: 4 records ok, 1 corrupt region, 272 bytes skipped"

name="verify a truncated file"
run verify truncated.tfrecord
expect_rc 3
expect_out_has "corrupt region at byte offset 337 (record index 4), 17 bytes skipped: truncated record"

name="verify reports every region, not only the first"
python3 - "$T" <<'PY'
import sys
d = sys.argv[1]
good = open(f"{d}/good.tfrecord", "rb").read()
bad = bytearray(good + good)     # ten records; corrupt records 0, 2 and 7
for off in (16, 37 + 12, 357 + 37 + 12):
    bad[off] ^= 0x80
open(f"{d}/many_bad.tfrecord", "wb").write(bytes(bad))
PY
run verify --json many_bad.tfrecord
expect_rc 3; expect_json
expect_py '
f = doc["files"][0]
r = [(x["offset"], x["record_index"], x["bytes_skipped"]) for x in f["regions"]]
assert r == [(0, 0, 21), (37, 2, 28), (394, 7, 28)], r
assert (f["records_ok"], f["corrupt_regions"], f["bytes_skipped"]) == (7, 3, 77), f
assert f["status"] == "corrupt", f'

name="verify --json over several files"
run verify --json good.tfrecord payload_flip.tfrecord length_flip.tfrecord truncated.tfrecord good.tfrecord.gz
expect_rc 3; expect_json
expect_py '
f = {x["path"]: x for x in doc["files"]}
assert f["good.tfrecord"]["status"] == "ok" and f["good.tfrecord"]["regions"] == []
assert f["good.tfrecord.gz"]["records_ok"] == 5 and f["good.tfrecord.gz"]["compression"] == "GZIP"
reg = f["payload_flip.tfrecord"]["regions"]
assert [(x["offset"], x["record_index"], x["bytes_skipped"]) for x in reg] == [(37, 2, 28)], reg
assert "payload CRC" in reg[0]["reason"]
reg = f["length_flip.tfrecord"]["regions"]
assert [(x["offset"], x["record_index"], x["bytes_skipped"]) for x in reg] == [(65, 3, 272)], reg
reg = f["truncated.tfrecord"]["regions"]
assert [(x["offset"], x["record_index"], x["bytes_skipped"]) for x in reg] == [(337, 4, 17)], reg
t = doc["total"]
assert (t["files"], t["files_ok"], t["files_corrupt"], t["files_failed"]) == (5, 2, 3, 0), t
assert (t["records_ok"], t["corrupt_regions"], t["bytes_skipped"]) == (22, 3, 317), t'

name="verify a broken GZIP stream: data loss, never a clean file"
# A deflate stream cannot be resynchronised: the library reports the damage either as a failed
# file (DataLoss) or, under the skip policy verify uses, as one region covering the rest.
run verify --json truncated.tfrecord.gz
expect_rc 3; expect_json
expect_py '
f = doc["files"][0]
if f["status"] == "error":
    assert f["error"]["code"] == "DataLoss", f
else:
    assert f["status"] == "corrupt" and len(f["regions"]) == 1, f
    assert "GZIP" in f["regions"][0]["reason"], f
assert f["records_ok"] < 5, f'
expect_err_has "recordflow: DataLoss: "

name="verify a missing file among good ones"
run verify good.tfrecord missing.tfrecord
expect_rc 1
expect_out_has "missing.tfrecord: FAILED (NotFound)"
expect_out_has "total: 2 files (1 ok, 0 corrupt, 1 failed)"
expect_err_has "recordflow: NotFound: "; expect_err_has "missing.tfrecord"

# ---- index -----------------------------------------------------------------------------------
name="index writes FILE.idx in DALI's format"
run index good.tfrecord
expect_rc 0; expect_out "wrote good.tfrecord.idx (5 records)"
expect_same_file good.tfrecord.idx expected.idx

name="index --check of a matching index"
run index --check good.tfrecord
expect_rc 0; expect_out_has "good.tfrecord.idx: OK"

name="index --output"
run index --output custom.idx good.tfrecord
expect_rc 0; expect_same_file custom.idx expected.idx
run index --check --output custom.idx good.tfrecord
expect_rc 0

name="index several files"
cp good.tfrecord second.tfrecord
run index good.tfrecord second.tfrecord empty.tfrecord
expect_rc 0
expect_same_file second.tfrecord.idx expected.idx
if [[ -f empty.tfrecord.idx && ! -s empty.tfrecord.idx ]]; then pass; else fail "empty index"; fi

name="index --output with several files is a usage error"
run index --output x.idx good.tfrecord second.tfrecord
expect_rc 2; expect_err_has "recordflow: usage error: "
if [[ ! -e x.idx ]]; then pass; else fail "x.idx was written"; fi

name="index --check reports a stale index"
printf '0 21\n21 16\n37 28\n65 270\n' >stale.idx
run index --check --output stale.idx good.tfrecord
expect_rc 3
expect_out_has "stale.idx: line 4: index has '65 270', file has '65 272'"
expect_out_has "stale.idx: line 5: index has nothing, file has '337 20'"
expect_out_has "stale.idx: MISMATCH"
expect_err_has "recordflow: DataLoss: "
run index --check --json --output stale.idx good.tfrecord
expect_rc 3; expect_json
expect_py '
f = doc["files"][0]
assert f["status"] == "mismatch" and f["mismatch_count"] == 2, f
assert f["mismatches"][0] == {"line": 4, "index": {"offset": 65, "size": 270},
                              "file": {"offset": 65, "size": 272}}, f
assert f["mismatches"][1]["index"] is None, f'

name="index --check without an index"
run index --check second.tfrecord.gz
expect_rc 1; expect_err_has "NotFound"

name="index refuses compressed files"
run index good.tfrecord.gz
expect_rc 1; expect_err_has "recordflow: InvalidArgument: "; expect_err_has "uncompressed"
if [[ ! -e good.tfrecord.gz.idx ]]; then pass; else fail "an index was written"; fi
run index --compression GZIP gzip_no_extension.bin
expect_rc 1; expect_err_has "uncompressed"

name="index refuses a corrupt file"
run index payload_flip.tfrecord
expect_rc 3; expect_err_has "byte offset 37"
if [[ ! -e payload_flip.tfrecord.idx ]]; then pass; else fail "an index was written"; fi

name="index --json"
run index --json good.tfrecord missing.tfrecord
expect_rc 1; expect_json
expect_py '
f = doc["files"]
assert f[0]["status"] == "written" and f[0]["records"] == 5, f
assert f[1]["status"] == "error" and f[1]["error"]["code"] == "NotFound", f'

name="index a missing file"
run index missing.tfrecord
expect_rc 1; expect_err_has "recordflow: NotFound: "; expect_err_has "missing.tfrecord"

# ---- command line errors and help ------------------------------------------------------------
name="bad command lines exit 2"
for args in "count --bogus good.tfrecord" "count" "frobnicate" "" \
            "count --compression LZ4 good.tfrecord" "count --on-corruption ignore good.tfrecord" \
            "cat --format xml good.tfrecord" "cat --limit -1 good.tfrecord" \
            "cat --limit many good.tfrecord" "cat --skip -2 good.tfrecord" "cat good.tfrecord good.tfrecord" "verify" \
            "index"; do
  # shellcheck disable=SC2086  # word splitting is the point
  run $args
  name="bad command line: recordflow $args"
  expect_rc 2; expect_err_has "recordflow: usage error: "
done

name="--help exits 0 and prints usage"
for sub in "" count cat verify index; do
  # shellcheck disable=SC2086
  run $sub --help
  name="recordflow $sub --help"
  expect_rc 0; expect_out_has "Usage: recordflow"
done

name="--version"
run --version
expect_rc 0; expect_out_has "recordflow 0."

name="a header with a valid CRC claiming 1 TiB is a truncation (exit 3), not a limit"
cp good.tfrecord huge_claim.tfrecord
python3 - huge_claim.tfrecord <<'PY'
import struct, sys
from tfrecord_ref import masked
with open(sys.argv[1], "ab") as f:
    f.write(struct.pack("<QI", 1 << 40, masked(struct.pack("<Q", 1 << 40))) + b"abc")
PY
run verify huge_claim.tfrecord
expect_rc 3; expect_out_has "truncated record"

# ---- inspect ---------------------------------------------------------------------------------
# Example records come from a tiny protobuf encoder below (no TensorFlow, no recordflow code).
# Six records; per record i:
#   label  int64 [i]                      always, 1 value      -> FixedLen([], "int64")
#   xy     float [i, -i]                  always, 2 values     -> FixedLen([2], "float32")
#   name   bytes [b"n" * (i + 1)]         always, 1..6 bytes   -> FixedLen([], "bytes")
#   tags   int64 [i] * (i % 3)            0..2 values          -> VarLen("int64")
#   maybe  float [0.5]                    even i only          -> VarLen("float32")
#   mixed  int64 for i < 4, bytes after   conflicting kinds    -> no spec
#   we"ird key  int64 [1]                 a key that needs quoting in Python
python3 - "$T" <<'PY' || { echo "inspect test data generation failed" >&2; exit 1; }
import gzip, os, struct, sys

from tfrecord_ref import frame, ld, varint

out = sys.argv[1]

def feature(kind, values):
    if kind == "bytes":
        return ld(1, b"".join(ld(1, v) for v in values))
    if kind == "float":
        return ld(2, ld(1, b"".join(struct.pack("<f", v) for v in values)) if values else b"")
    return ld(3, ld(1, b"".join(varint(v) for v in values)) if values else b"")

def example(features):
    entries = b"".join(ld(1, ld(1, k.encode()) + ld(2, feature(*f))) for k, f in features.items())
    return ld(1, entries)

records = []
for i in range(6):
    f = {
        "label": ("int64", [i]),
        "xy": ("float", [float(i), float(-i)]),
        "name": ("bytes", [b"n" * (i + 1)]),
        "tags": ("int64", [i] * (i % 3)),
        "mixed": ("int64", [i]) if i < 4 else ("bytes", [b"m"]),
        'we"ird key': ("int64", [1]),
    }
    if i % 2 == 0:
        f["maybe"] = ("float", [0.5])
    records.append(example(f))

def write(name, payloads, compress=False):
    data = frame(payloads)
    with open(os.path.join(out, name), "wb") as fh:
        fh.write(gzip.compress(data) if compress else data)

write("examples.tfrecord", records)
write("examples.tfrecord.gz", records, compress=True)
# b"alpha" is not an Example (truncated fixed64); b"" is one, with no features.
write("with_junk.tfrecord", records[:2] + [b"alpha", b""] + records[2:])
PY

name="inspect: text report with the proposed spec"
run inspect examples.tfrecord
expect_rc 0; expect_err_empty
expect_out_has "examples.tfrecord: $(stat -c %s examples.tfrecord) bytes, NONE, 6 records scanned"
expect_out_has "records: 6 (size min "
expect_out_has "examples: 6 well-formed (0 without features), 0 malformed"
expect_out_has '    "label": rf.FixedLen([], "int64"),'
expect_out_has '    "xy": rf.FixedLen([2], "float32"),'
expect_out_has '    "name": rf.FixedLen([], "bytes"),'
expect_out_has '    "tags": rf.VarLen("int64"),'
expect_out_has '    "maybe": rf.VarLen("float32"),'
expect_out_has '    # "mixed": left out, conflicting types'
expect_out_has '    "we\"ird key": rf.FixedLen([], "int64"),'
# Table rows: key, type, presence, values min / mean / max, bytes per value, spec.
if grep -Eq '^maybe +float32 +50\.0% +1 / 1 / 1 +- +rf\.VarLen\("float32"\)$' "$T/out"; then pass; else fail "maybe row"; fi
if grep -Eq '^tags +int64 +100\.0% +0 / 1 / 2 +- +rf\.VarLen\("int64"\)$' "$T/out"; then pass; else fail "tags row"; fi
if grep -Eq '^name +bytes +100\.0% +1 / 1 / 1 +3\.5 +rf\.FixedLen\(\[\], "bytes"\)$' "$T/out"; then pass; else fail "name row"; fi
if grep -Eq '^mixed +bytes\|int64 +100\.0% .*- \(conflicting types\)$' "$T/out"; then pass; else fail "mixed row"; fi
if grep -Eq '^"we\\"ird key" +int64 ' "$T/out"; then pass; else fail "quoted key row"; fi

name="inspect --json"
run inspect --json examples.tfrecord
expect_rc 0; expect_json
expect_py '
import os
f = doc["files"]
assert len(f) == 1 and f[0]["path"] == "examples.tfrecord" and f[0]["status"] == "ok", f
assert f[0]["file_bytes"] == os.path.getsize("examples.tfrecord") and f[0]["records"] == 6, f
assert f[0]["compression"] == "NONE", f
assert (doc["records"], doc["examples"], doc["malformed_records"]) == (6, 6, 0), doc
assert doc["first_malformed"] is None and doc["limit_reached"] is False, doc
rb = doc["record_bytes"]
assert rb["min"] <= rb["mean"] <= rb["max"] and rb["total"] == os.path.getsize("examples.tfrecord") - 6 * 16, rb
k = {x["key"]: x for x in doc["features"]}
assert list(k) == sorted(k), list(k)
assert set(k) == {"label", "xy", "name", "tags", "maybe", "mixed", "we\"ird key"}, list(k)
assert k["label"]["spec"] == {"kind": "FixedLen", "shape": [], "dtype": "int64",
                              "python": "rf.FixedLen([], \"int64\")"}, k["label"]
assert k["xy"]["spec"]["shape"] == [2] and k["xy"]["spec"]["dtype"] == "float32", k["xy"]
assert k["name"]["value_bytes"] == {"min": 1, "mean": 3.5, "max": 6, "total": 21}, k["name"]
assert k["tags"]["values"] == {"min": 0, "mean": 1, "max": 2, "total": 6}, k["tags"]
assert k["tags"]["spec"] == {"kind": "VarLen", "dtype": "int64", "python": "rf.VarLen(\"int64\")"}
assert k["maybe"]["presence"] == 0.5 and k["maybe"]["records_present"] == 3, k["maybe"]
assert k["maybe"]["spec"]["kind"] == "VarLen", k["maybe"]
m = k["mixed"]
assert m["conflicting"] is True and m["types"] == ["bytes", "int64"] and m["spec"] is None, m
assert not k["label"]["conflicting"] and k["label"]["types"] == ["int64"], k["label"]
assert "value_bytes" not in k["label"], k["label"]'

name="inspect counts records that are not Examples, and names the first"
run inspect --json with_junk.tfrecord
expect_rc 0; expect_json
expect_py '
assert (doc["records"], doc["examples"], doc["empty_examples"], doc["malformed_records"]) == (8, 7, 1, 1), doc
m = doc["first_malformed"]
assert m["path"] == "with_junk.tfrecord" and m["record_index"] == 2, m
assert m["error"]["code"] == "DataLoss", m
k = {x["key"]: x for x in doc["features"]}
assert k["label"]["records_present"] == 6 and k["label"]["presence"] == 6 / 7, k["label"]
assert k["label"]["spec"]["kind"] == "VarLen", k["label"]  # missing from the empty Example'
run inspect with_junk.tfrecord
expect_rc 0
expect_out_has "examples: 7 well-formed (1 without features), 1 malformed"
expect_out_has "first malformed record: record 2 of 'with_junk.tfrecord': DataLoss: "

name="inspect raw payloads: all counted, none fatal"
run inspect --json good.tfrecord
expect_rc 0
expect_py '
assert (doc["records"], doc["examples"], doc["empty_examples"], doc["malformed_records"]) == (5, 1, 1, 4), doc
assert doc["features"] == [] and doc["first_malformed"]["record_index"] == 0, doc
assert (doc["record_bytes"]["min"], doc["record_bytes"]["max"], doc["record_bytes"]["total"]) == (0, 256, 277), doc'
run inspect good.tfrecord
expect_rc 0; expect_out_has "no features found"

name="inspect several files as one dataset, GZIP from the extension"
run inspect --json examples.tfrecord examples.tfrecord.gz
expect_rc 0
expect_py '
assert [x["compression"] for x in doc["files"]] == ["NONE", "GZIP"], doc["files"]
assert [x["records"] for x in doc["files"]] == [6, 6], doc["files"]
assert doc["records"] == 12
k = {x["key"]: x for x in doc["features"]}
assert k["label"]["records_present"] == 12 and k["label"]["spec"]["kind"] == "FixedLen", k["label"]'
run inspect --compression GZIP --json gzip_no_extension.bin
expect_rc 0
expect_py 'assert doc["files"][0]["compression"] == "GZIP" and doc["records"] == 5, doc'

name="inspect --limit counts records across files"
run inspect --json --limit 8 examples.tfrecord examples.tfrecord.gz examples.tfrecord
expect_rc 0
expect_py '
assert [x["records"] for x in doc["files"]] == [6, 2, 0], doc["files"]
assert [x["status"] for x in doc["files"]] == ["ok", "ok", "not_read"], doc["files"]
assert doc["files"][2]["file_bytes"] > 0, doc["files"]
assert doc["records"] == 8 and doc["limit_reached"] is True, doc'
run inspect --limit 3 examples.tfrecord examples.tfrecord.gz
expect_rc 0
expect_out_has "examples.tfrecord: $(stat -c %s examples.tfrecord) bytes, NONE, 3 records scanned"
expect_out_has "examples.tfrecord.gz: $(stat -c %s examples.tfrecord.gz) bytes, GZIP, not read (--limit reached)"
run inspect --limit 0 examples.tfrecord
expect_rc 0; expect_out_has "records: 0"; expect_out_has "no features found"

name="inspect --limit stops before a corrupt record"
run inspect --limit 2 payload_flip.tfrecord
expect_rc 0

name="inspect stops a file at corrupt framing: exit 3, report of what was read"
run inspect payload_flip.tfrecord
expect_rc 3
expect_err_has "recordflow: DataLoss: "; expect_err_has "byte offset 37 (record index 2)"
expect_out_has "payload_flip.tfrecord: 357 bytes, NONE, 2 records scanned, then FAILED (DataLoss)"
run inspect --json payload_flip.tfrecord examples.tfrecord
expect_rc 3; expect_json
expect_py '
f = doc["files"]
assert f[0]["status"] == "error" and f[0]["error"]["code"] == "DataLoss" and f[0]["records"] == 2, f
assert f[1]["status"] == "ok" and doc["records"] == 8, doc'

name="inspect a missing file among good ones: exit 1, the rest still reported"
run inspect missing.tfrecord examples.tfrecord
expect_rc 1; expect_err_has "recordflow: NotFound: "; expect_err_has "missing.tfrecord"
expect_out_has "missing.tfrecord: FAILED (NotFound)"
expect_out_has '"label": rf.FixedLen([], "int64")'
run inspect --json missing.tfrecord payload_flip.tfrecord
expect_rc 1; expect_json
expect_py '
f = doc["files"]
assert f[0]["status"] == "error" and f[0]["error"]["code"] == "NotFound" and f[0]["file_bytes"] is None, f'

name="inspect the TensorFlow golden file (one tf.train.Example among raw payloads)"
src="${BASH_SOURCE[0]}"; [[ "$src" == /* ]] || src="$OLDPWD/$src"
golden="$(dirname "$src")/../../testdata/golden/records.tfrecord"
run inspect --json "$golden"
expect_rc 0
expect_py '
assert (doc["records"], doc["examples"], doc["empty_examples"], doc["malformed_records"]) == (24, 4, 3, 20), doc
k = {x["key"]: x for x in doc["features"]}
assert sorted(k) == ["empty", "floats", "image/class/label", "image/class/text", "image/encoded",
                     "image/format", "image/height", "image/width", "ints"], list(k)
assert k["floats"]["values"]["max"] == 4 and k["floats"]["types"] == ["float32"], k["floats"]
assert k["image/encoded"]["value_bytes"]["total"] == 23, k["image/encoded"]'

name="inspect bad command lines exit 2"
for args in "inspect" "inspect --limit -1 examples.tfrecord" "inspect --limit many examples.tfrecord" \
            "inspect --compression LZ4 examples.tfrecord" "inspect --bogus examples.tfrecord"; do
  # shellcheck disable=SC2086
  run $args
  name="bad command line: recordflow $args"
  expect_rc 2; expect_err_has "recordflow: usage error: "
done
run inspect --help
name="recordflow inspect --help"
expect_rc 0; expect_out_has "Usage: recordflow inspect"

# ---- command-line messages: unknown commands, numeric options --------------------------------
name="an unknown command is named, exit 2"
run bogus
expect_rc 2; expect_err_has "unknown command 'bogus'"; expect_err_has "convert"
for args in "cat --limit 18446744073709551616 good.tfrecord" "cat --limit -1 good.tfrecord" \
            "cat --skip -5 good.tfrecord" "inspect --limit 18446744073709551616 good.tfrecord" \
            "convert src dst --seed -1" "convert src dst --max-pixels 18446744073709551616" \
            "convert src dst --shards 0" "convert src dst --label-offset 9223372036854775808" \
            "convert src dst -j -1" "convert src dst --quality 101" \
            "convert src dst --resize-shorter -3" "convert src dst --shard-size 1e30"; do
  # shellcheck disable=SC2086
  run $args
  name="numeric option out of range is a short usage error: recordflow $args"
  expect_rc 2; expect_err_has "recordflow: usage error: "
  if [[ ${#err} -lt 400 ]]; then pass; else fail "message of ${#err} bytes"; fi
done
name="--limit 2^64 names the accepted range"
run cat --limit 18446744073709551616 good.tfrecord
expect_err_has "from 0 to 18446744073709551615"
name="--limit at the top of the range is accepted"
run cat --limit 18446744073709551615 --format hex good.tfrecord
expect_rc 0

# ---- doctor ----------------------------------------------------------------------------------
# `recordflow doctor` is native (pipeline::Diagnose): no Python interpreter is needed. The
# report's rules are tested in diagnose_test.cc; here: the command, its output and exit codes.
name="doctor: runs without any Python (none on PATH, RECORDFLOW_PYTHON unusable)"
golden_examples="$(dirname "$src")/../../testdata/golden/examples.tfrecord"
PATH=/nonexistent RECORDFLOW_PYTHON="$T/no-such-python" "$RF" doctor "$golden_examples" --preset parse \
  --batch 4 --seconds 0.2 --step-ms 1 --no-variants --json --html "$T/doctor.html" >"$T/out" 2>"$T/err"
rc=$?; out="$(cat "$T/out")"; err="$(cat "$T/err")"
expect_rc 0; expect_json
expect_py '
assert doc["preset"] == "parse" and doc["files"] == 1, doc
assert [s["id"] for s in doc["stages"]][:3] == ["read", "process", "prefetch"], doc["stages"]
assert "parse" in doc["stages"][1]["name"], doc["stages"][1]
assert doc["verdict"] in ("input-bound", "not input-bound") and doc["step"]["steps"] > 0, doc
assert doc["step"]["mode"] == "simulated 1 ms step", doc["step"]
'
if grep -q "Verdict: " "$T/doctor.html" && grep -q "<svg" "$T/doctor.html"; then pass; else
  fail "the HTML report lacks the verdict or the timeline"; fi
name="doctor: the text report of a GZIP file without a step"
run doctor good.tfrecord.gz --seconds 0.2 --no-variants --quiet
expect_rc 0; expect_out_has "VERDICT: NO STEP GIVEN"; expect_out_has "[read] "
expect_err_empty
name="doctor: progress goes to stderr"
run doctor good.tfrecord --seconds 0.1 --no-variants
expect_rc 0; expect_err_has "doctor: running the pipeline alone for 0.1 s"
name="doctor: a glob that matches nothing is NotFound, exit 1"
run doctor "$T/none-*.tfrecord"
expect_rc 1; expect_err_has "recordflow: NotFound: no files match"
name="doctor: a missing path is a usage error naming it, exit 2"
run doctor /no/such
expect_rc 2; expect_err_has "recordflow: usage error: no such file: '/no/such'"
name="doctor: a folder is a usage error, exit 2"
run doctor "$T"
expect_rc 2; expect_err_has "is a folder"
name="doctor: an unknown preset and a zero batch are usage errors, exit 2"
run doctor good.tfrecord --preset nope
expect_rc 2
run doctor good.tfrecord --batch 0
expect_rc 2; expect_err_has "--batch must be > 0"
name="doctor: corrupt data is DataLoss, exit 3"
run doctor truncated.tfrecord.gz --seconds 0.2 --no-variants --quiet
expect_rc 3; expect_err_has "recordflow: DataLoss: "
name="doctor --help lists its options"
run doctor --help
expect_rc 0; expect_out_has "--preset"; expect_out_has "--step-ms"
name="recordflow --help lists doctor"
run --help
expect_rc 0; expect_out_has "doctor"

# ---- reshard ---------------------------------------------------------------------------------
# Inputs written from the byte layout (no recordflow code): three files, one GZIP; the shards are
# read back the same way by $RS/read_records.py, every CRC checked.
RS="$T/rs"
mkdir -p "$RS/in"
cat >"$RS/tfr.py" <<'PY'
import gzip, struct
import tfrecord_ref
from tfrecord_ref import masked
def frame(p):
    return tfrecord_ref.frame([p])
def records(path):
    data = open(path, "rb").read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        assert struct.unpack_from("<I", data, pos + 8)[0] == masked(data[pos:pos + 8]), (path, pos)
        p = data[pos + 12:pos + 12 + n]
        assert struct.unpack_from("<I", data, pos + 12 + n)[0] == masked(p), (path, pos)
        yield p
        pos += 16 + n
PY
python3 - "$RS" <<'PY' || { echo "reshard test data generation failed" >&2; exit 1; }
import gzip, sys
sys.path.insert(0, sys.argv[1])
from tfr import frame
out = sys.argv[1]
def payload(f, i):
    return b"f%dr%d:" % (f, i) + bytes((i * 7 + j) % 256 for j in range((i * 37 + f) % 400))
for f, n in enumerate([40, 25, 33]):
    data = b"".join(frame(payload(f, i)) for i in range(n))
    if f == 1:
        with gzip.open(out + "/in/part-1.tfrecord.gz", "wb") as g:
            g.write(data)
    else:
        open(out + "/in/part-%d.tfrecord" % f, "wb").write(data)
# For the kill test: 4000 records of about 2 KB.
open(out + "/big.tfrecord", "wb").write(
    b"".join(frame(payload(9, i) + bytes(2048)) for i in range(4000)))
PY
# records_of FILE...: one hex payload per line, in file order.
records_of() {
  python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); from tfr import records
for p in sys.argv[2:]:
    for r in records(p): print(r.hex())' "$RS" "$@"
}
inputs=("$RS/in/part-0.tfrecord" "$RS/in/part-1.tfrecord.gz" "$RS/in/part-2.tfrecord")
records_of "${inputs[@]}" >"$RS/want.txt"

name="reshard: input order, N shards with .idx, records byte-exact, --json summary"
run reshard "${inputs[@]}" "$RS/ordered" --shards 4 --json
expect_rc 0; expect_json
expect_py '
assert doc["records"] == 98 and len(doc["shards"]) == 4, doc
assert [s["file"] for s in doc["shards"]] == ["shard-%05d-of-00004.tfrecord" % k for k in range(4)]
assert sorted(s["records"] for s in doc["shards"]) == [24, 24, 25, 25], doc
assert doc["resumed_shards"] == 0 and doc["records_this_run"] == 98'
records_of "$RS"/ordered/shard-*-of-00004.tfrecord >"$RS/got.txt"
expect_same_file "$RS/got.txt" "$RS/want.txt"
name="reshard: each .idx has one 'offset size' line per record"
idx_ok=1
for f in "$RS"/ordered/shard-*-of-00004.tfrecord; do
  [[ "$(wc -l <"$f.idx")" -eq "$(records_of "$f" | wc -l)" ]] || idx_ok=0
done
if [[ $idx_ok -eq 1 ]]; then pass; else fail ".idx line counts differ from record counts"; fi

name="reshard --shuffle --seed: the same multiset, another order, the same bytes every run"
run reshard "${inputs[@]}" "$RS/shuf1" --shards 3 --shuffle --seed 7
expect_rc 0; expect_out_has "resharded 98 records from 3 files into 3 shards"
run reshard "${inputs[@]}" "$RS/shuf2" --shards 3 --shuffle --seed 7
expect_rc 0
for k in 0 1 2; do
  expect_same_file "$RS/shuf1/shard-0000$k-of-00003.tfrecord" "$RS/shuf2/shard-0000$k-of-00003.tfrecord"
done
records_of "$RS"/shuf1/shard-*-of-00003.tfrecord >"$RS/shuf.txt"
if cmp -s "$RS/shuf.txt" "$RS/want.txt"; then fail "shuffled order equals input order"; else pass; fi
sort "$RS/shuf.txt" >"$RS/shuf.sorted"; sort "$RS/want.txt" >"$RS/want.sorted"
expect_same_file "$RS/shuf.sorted" "$RS/want.sorted"

name="reshard --compression GZIP: .tfrecord.gz shards, no .idx, same records"
run reshard "${inputs[@]}" "$RS/gz" --shards 2 --compression GZIP
expect_rc 0
if [[ -f "$RS/gz/shard-00001-of-00002.tfrecord.gz" && ! -e "$RS/gz/shard-00001-of-00002.tfrecord.gz.idx" ]]; then
  pass
else
  fail "GZIP shard names or .idx wrong: $(ls "$RS/gz")"
fi
records_of "$RS"/gz/shard-*.tfrecord.gz >"$RS/gz.txt"
expect_same_file "$RS/gz.txt" "$RS/want.txt"

name="reshard into a DST that holds shards, without --resume: exit 1, names DST"
run reshard "${inputs[@]}" "$RS/ordered" --shards 4
expect_rc 1; expect_err_has "recordflow: AlreadyExists: "; expect_err_has "$RS/ordered"; expect_err_has "--resume"
name="reshard: a missing input is NotFound naming it, exit 1"
run reshard "$RS/in/nope.tfrecord" "$RS/x" --shards 2
expect_rc 1; expect_err_has "recordflow: NotFound: "; expect_err_has "$RS/in/nope.tfrecord"
name="reshard: corrupt input is DataLoss, exit 3, nothing published"
cp "$RS/in/part-0.tfrecord" "$RS/bad.tfrecord"
printf 'X' | dd of="$RS/bad.tfrecord" bs=1 seek=100 conv=notrunc 2>/dev/null
run reshard "$RS/bad.tfrecord" "$RS/badout" --shards 2
expect_rc 3; expect_err_has "recordflow: DataLoss: "; expect_err_has "$RS/bad.tfrecord"
if ls "$RS/badout" 2>/dev/null | grep -q tfrecord; then fail "shards published from corrupt input"; else pass; fi
for args in "reshard" "reshard $RS/in/part-0.tfrecord" "reshard $RS/in/part-0.tfrecord $RS/y" \
            "reshard $RS/in/part-0.tfrecord $RS/y --shards 0" \
            "reshard $RS/in/part-0.tfrecord $RS/y --shards 2 --compression LZ4"; do
  # shellcheck disable=SC2086
  run $args
  name="bad command line: recordflow $args"
  expect_rc 2; expect_err_has "recordflow: usage error: "
done
run reshard --help
name="recordflow reshard --help"
expect_rc 0; expect_out_has "--shards"; expect_out_has "--resume"

name="reshard killed mid-run, then --resume: finished shards kept, output identical to one run"
run reshard "$RS/big.tfrecord" "$RS/full" --shards 100 --shuffle --seed 1 --no-sync
expect_rc 0
"$RF" reshard "$RS/big.tfrecord" "$RS/cut" --shards 100 --shuffle --seed 1 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 500); do  # until a few shards are published (fsync'd one by one), at most 5 s
  [[ $(ls "$RS/cut" 2>/dev/null | grep -c 'tfrecord.idx$') -ge 3 ]] && break
  sleep 0.01
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
killed=$?
if [[ $killed -ne 137 ]]; then
  # It finished before the kill (a fast disk): leave what a kill would have left instead.
  rm -f "$RS"/cut/shard-0005*-of-00100.tfrecord* "$RS"/cut/shard-0009*-of-00100.tfrecord.idx
fi
kept_before=$(ls "$RS/cut" | grep -c 'tfrecord.idx$')
run reshard "$RS/big.tfrecord" "$RS/cut" --shards 100 --shuffle --seed 1 --resume --json
expect_rc 0
expect_py "
assert doc['resumed_shards'] == $kept_before and 0 < doc['resumed_shards'] < 100, (doc['resumed_shards'], $kept_before)
assert doc['records'] == 4000"
same=1
for f in "$RS"/full/shard-*; do cmp -s "$f" "$RS/cut/$(basename "$f")" || same=0; done
if [[ $same -eq 1 && $(ls -A "$RS/cut" | grep -c tmp) -eq 0 ]]; then pass; else fail "resumed output differs from an uninterrupted run"; fi
name="reshard --resume with other options: exit 1, FailedPrecondition"
run reshard "$RS/big.tfrecord" "$RS/cut" --shards 100 --shuffle --seed 2 --resume
expect_rc 1; expect_err_has "recordflow: FailedPrecondition: "

# ---- non-regular files and file size limits (format helper) -----------------------------------
# A FIFO, a pipe, a device or a /proc file is refused at once, never waited on and never read
# as an empty file ("OK: 0 records").
mkfifo "$T/records.fifo"
for cmd in count verify cat; do
  name="$cmd on a FIFO is refused at once, exit 1"
  timeout 10 "$RF" "$cmd" "$T/records.fifo" >"$T/out" 2>"$T/err"; rc=$?
  out="$(cat "$T/out")"; err="$(cat "$T/err")"
  expect_rc 1; expect_err_has "InvalidArgument"; expect_err_has "FIFO"
done
for dev in /dev/zero /dev/urandom /proc/self/status; do
  name="verify $dev is refused, exit 1"
  timeout 10 "$RF" verify "$dev" >"$T/out" 2>"$T/err"; rc=$?
  out="$(cat "$T/out")"; err="$(cat "$T/err")"
  expect_rc 1; expect_err_has "reads regular files only"
done
name="count /dev/stdin from a pipe is refused, exit 1"
timeout 10 "$RF" count /dev/stdin <"$T/good.tfrecord" >/dev/null 2>&1; rc_file=$?
cat "$T/good.tfrecord" | timeout 10 "$RF" count /dev/stdin >"$T/out" 2>"$T/err"; rc=$?
out="$(cat "$T/out")"; err="$(cat "$T/err")"
expect_rc 1; expect_err_has "FIFO"
name="count /dev/stdin redirected from a regular file reads it, exit 0"
rc=$rc_file; expect_rc 0
name="verify <(cat f) is refused, exit 1"
timeout 10 "$RF" verify <(cat "$T/good.tfrecord") >"$T/out" 2>"$T/err"; rc=$?
out="$(cat "$T/out")"; err="$(cat "$T/err")"
expect_rc 1; expect_err_has "FIFO"

# Over `ulimit -f` the command fails with ResourceExhausted (it is not killed by SIGXFSZ) and
# leaves no temporary file behind.
mkdir -p "$T/fsize"
python3 - "$T" <<'PY'
import struct, sys
from tfrecord_ref import masked
length = struct.pack("<Q", 0)
rec = length + struct.pack("<I", masked(length)) + struct.pack("<I", masked(b""))
open(sys.argv[1] + "/fsize/many.tfrecord", "wb").write(rec * 4000)  # 64,000 bytes; .idx ~36 KB
PY
name="index over ulimit -f is ResourceExhausted, not SIGXFSZ, and leaves no temp file"
(ulimit -f 8; exec "$RF" index "$T/fsize/many.tfrecord") >"$T/out" 2>"$T/err"; rc=$?
out="$(cat "$T/out")"; err="$(cat "$T/err")"
expect_rc 1; expect_err_has "ResourceExhausted"
leftover="$(ls -A "$T/fsize" | grep -v '^many.tfrecord$' || true)"
if [[ -z "$leftover" ]]; then pass; else fail "left behind: $leftover"; fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
