"""The demo: `python -m recordflow.demo [OUT_DIR]`.

Writes a few thousand records of built-in demo data (synthetic payloads shaped like an image
dataset's: a ~2-20 KB "image" plus a small header each), plain with an index and GZIP, then
checks them with the `recordflow` CLI (verify, count), reads them back three ways, and prints
throughput. Everything it writes goes to OUT_DIR (a new temporary folder by default).
"""

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import recordflow as rf

NUM_RECORDS = 5000


def demo_payloads(n, seed=0):
    rng = random.Random(seed)
    for i in range(n):
        label = i % 10
        body = rng.randbytes(rng.randint(2_000, 20_000))
        yield b"demo-record/%06d/label=%d/" % (i, label) + body


def rate(count, nbytes, seconds):
    return f"{count / seconds:12,.0f} records/s  {nbytes / seconds / 1e6:9.1f} MB/s"


def run_cli(*args):
    exe = shutil.which("recordflow")
    if exe is None:
        print("  (the recordflow CLI is not on PATH; skipping)")
        return None
    proc = subprocess.run([exe, *args], capture_output=True, text=True)
    print("  $ recordflow " + " ".join(args) + f"   [exit {proc.returncode}]")
    for line in (proc.stdout + proc.stderr).strip().splitlines()[:8]:
        print("    " + line)
    return proc.returncode


def main(argv):
    out = argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="recordflow-demo-")
    os.makedirs(out, exist_ok=True)
    plain = os.path.join(out, "demo.tfrecord")
    gz = os.path.join(out, "demo.tfrecord.gz")
    payloads = list(demo_payloads(NUM_RECORDS))
    total = sum(len(p) for p in payloads)
    print(f"recordflow {rf.__version__} demo: {NUM_RECORDS} records, {total / 1e6:.1f} MB, "
          f"CRC32C backend: {rf.crc32c_backend()}, output in {out}")

    print("\n1. write")
    for path, kwargs in ((plain, {"index": True}), (gz, {})):
        t = time.perf_counter()
        with rf.RecordWriter(path, **kwargs) as w:
            for p in payloads:
                w.write(p)
        dt = time.perf_counter() - t
        print(f"  {os.path.basename(path):20s} {rate(NUM_RECORDS, total, dt)}  "
              f"file {os.path.getsize(path) / 1e6:.1f} MB")

    print("\n2. verify and count with the CLI")
    rc_verify = run_cli("verify", plain, gz)
    run_cli("count", "--json", plain, gz)

    print("\n3. read back")
    ok = True
    for path in (plain, gz):
        t = time.perf_counter()
        reader = rf.RecordReader(path)
        got = []
        while batch := reader.read_batch(1024):
            got.extend(batch)
        dt = time.perf_counter() - t
        same = got == payloads
        ok &= same
        print(f"  {os.path.basename(path):20s} {rate(len(got), total, dt)}  "
              f"identical: {'yes' if same else 'NO'}")
    t = time.perf_counter()
    n = rf.count_records(plain)
    dt = time.perf_counter() - t
    print(f"  {'native scan (CRC)':20s} {rate(n, total, dt)}")
    index = rf.IndexedRecordReader(plain)
    order = list(range(len(index)))
    random.Random(1).shuffle(order)
    t = time.perf_counter()
    shuffled_ok = all(index[i] == payloads[i] for i in order)
    dt = time.perf_counter() - t
    ok &= shuffled_ok
    print(f"  {'random access (idx)':20s} {rate(len(order), total, dt)}  "
          f"identical: {'yes' if shuffled_ok else 'NO'}")

    if rc_verify not in (None, 0):
        ok = False
    print("\ndemo " + ("succeeded" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
