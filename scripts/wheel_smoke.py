"""Smoke test of an installed recordflow wheel on a clean system (scripts/wheel_test.sh runs it
inside the debootstrap root; it also runs anywhere recordflow is installed):

    python wheel_smoke.py RECORDFLOW_CLI GOLDEN_DIR

Uses only recordflow, NumPy and the CLI: records written and read back (plain, GZIP, ZLIB), an
Example round trip, an image folder of JPEG (libjpeg-turbo), PNG (libpng) and GIF (giflib)
files converted into shards, a vision preset batch decoded from them, and `recordflow verify`
and `count` on the result. Exits non-zero with the failing step on any difference.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import recordflow as rf

# The classic 1x1 GIF89a: enough to prove the vendored giflib decodes.
_GIF_1X1 = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000"
                         "010001000002024401003b")


def check(cond, what):
    if not cond:
        sys.exit(f"wheel smoke: FAILED: {what}")
    print(f"ok  {what}")


def main():
    cli, golden = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="rf-smoke-")
    payloads = [bytes([i % 256]) * (i * 37 % 5000) for i in range(200)]
    for compression, suffix in ((None, ""), ("GZIP", ".gz"), ("ZLIB", ".zz")):
        path = os.path.join(work, "records.tfrecord" + suffix)
        with rf.RecordWriter(path, compression=compression) as w:
            for p in payloads:
                w.write(p)
        check(list(rf.RecordReader(path, compression=compression)) == payloads,
              f"200 records written and read back ({compression or 'plain'})")
    golden_records = list(rf.RecordReader(os.path.join(golden, "records.tfrecord")))
    check(len(golden_records) > 0, "TensorFlow-written golden records read")

    ex = rf.Example({"label": 3, "name": b"x", "values": [1.5, 2.5]}).serialize()
    parsed = rf.Example.parse(ex)
    check(list(parsed["label"]) == [3] and list(parsed["values"]) == [1.5, 2.5],
          "Example round trip")

    src = os.path.join(work, "images")
    rng = np.random.default_rng(0)
    for c, cls in enumerate(("cat", "dog")):
        os.makedirs(os.path.join(src, cls))
        for i in range(6):
            pixels = rng.integers(0, 256, size=(48 + 8 * i, 64, 3), dtype=np.uint8)
            with open(os.path.join(src, cls, f"{i}.jpg"), "wb") as f:
                f.write(rf.encode_jpeg(pixels, 90))
    pngs = sorted(glob.glob(os.path.join(golden, "png", "*.png")))[:4]
    for p in pngs:
        shutil.copy(p, os.path.join(src, "cat", os.path.basename(p)))
    with open(os.path.join(src, "dog", "tiny.gif"), "wb") as f:
        f.write(_GIF_1X1)
    n_images = 12 + len(pngs) + 1

    dst = os.path.join(work, "shards")
    rf.convert(src, dst, val_fraction=0.25, shards=2, seed=1)
    shards = sorted(glob.glob(os.path.join(dst, "*.tfrecord")))
    total = sum(1 for s in shards for _ in rf.RecordReader(s))
    check(total == n_images, f"convert: {n_images} images (JPEG, PNG, GIF) in {len(shards)} shards")
    formats = set()
    for s in shards:
        for record in rf.RecordReader(s):
            formats.add(bytes(rf.Example.parse(record)["image/format"][0]))
    check(formats == {b"JPEG"}, "convert: PNG and GIF decoded and stored as JPEG")

    train = sorted(glob.glob(os.path.join(dst, "train-*.tfrecord")))
    ds = rf.Dataset.from_files(train).map(rf.vision.imagenet_train(size=32)).batch(4)
    batch = next(iter(ds))
    check(batch["image"].shape == (4, 32, 32, 3) and batch["image"].dtype == np.float32 and
          np.isfinite(batch["image"]).all(), "vision preset batch decoded (4, 32, 32, 3) float32")
    check(set(batch["label"].tolist()) <= {0, 1}, "vision preset labels")

    out = subprocess.run([cli, "verify", *shards], capture_output=True, text=True)
    check(out.returncode == 0, f"recordflow verify exit 0 ({out.stdout.strip()[-200:]})")
    out = subprocess.run([cli, "count", *shards], capture_output=True, text=True)
    check(out.returncode == 0 and str(n_images) in out.stdout,
          f"recordflow count: {out.stdout.strip()[-200:]}")
    bad = os.path.join(work, "bad.tfrecord")
    with open(os.path.join(work, "records.tfrecord"), "rb") as f:
        data = bytearray(f.read())
    data[100] ^= 0xFF
    with open(bad, "wb") as f:
        f.write(data)
    out = subprocess.run([cli, "verify", bad], capture_output=True, text=True)
    check(out.returncode != 0 and "bad.tfrecord" in (out.stdout + out.stderr),
          "recordflow verify fails on a corrupted file and names it")
    shutil.rmtree(work)
    print("wheel smoke: all checks passed")


if __name__ == "__main__":
    main()
