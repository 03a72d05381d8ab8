"""The demo: `python -m recordflow.demo [OUT_DIR]`.

First the main job: generates a small ImageNet-like image folder from real photos that ship
inside scikit-image / scikit-learn (recordflow.datasets), converts it into train/validation
TFRecord shards with `recordflow convert`, verifies them with `recordflow verify`, and reads
them back with recordflow's parser, checking every image and label. Then it writes a few
thousand records of built-in demo data (synthetic payloads shaped like an image dataset's: a
~2-20 KB "image" plus a small header each), plain with an index and GZIP, then checks them
with the `recordflow` CLI (verify, count), reads them back three ways, and prints throughput.
Everything it writes goes to OUT_DIR (a new temporary folder by default). The demo data needs
the `recordflow[datasets]` extra (Pillow, scikit-image, scikit-learn).
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


def find_cli():
    """The CLI installed with this interpreter's package, else the first on PATH."""
    exe = os.path.join(os.path.dirname(sys.executable), "recordflow")
    return exe if os.path.exists(exe) else shutil.which("recordflow")


def run_cli(*args):
    exe = find_cli()
    if exe is None:
        print("  (the recordflow CLI is not on PATH; skipping)")
        return None
    proc = subprocess.run([exe, *args], capture_output=True, text=True)
    print("  $ recordflow " + " ".join(args) + f"   [exit {proc.returncode}]")
    for line in (proc.stdout + proc.stderr).strip().splitlines()[:8]:
        print("    " + line)
    return proc.returncode


def convert_demo(out):
    """Returns True when every image came back with the right label."""
    import json

    from recordflow import datasets

    images = os.path.join(out, "imagenet-like")
    shards = os.path.join(out, "imagenet-like-tfrecords")
    shutil.rmtree(images, ignore_errors=True)
    shutil.rmtree(shards, ignore_errors=True)
    t = time.perf_counter()
    info = datasets.make_imagenet_like(images, classes=10, images_per_class=30, seed=0)
    dt = time.perf_counter() - t
    print(f"  generated {info['images']} JPEGs in {len(info['classes'])} classes "
          f"({info['bytes'] / 1e6:.1f} MB, {info['bytes'] / info['images'] / 1e3:.0f} KB each) "
          f"from {len(info['sources'])} bundled photos in {dt:.1f} s")
    exe = find_cli()
    if exe is None:
        print("  (the recordflow CLI is not on PATH; using rf.convert)")
        summary = rf.convert(images, shards, val_fraction=0.1, shards=4, seed=0)
    else:
        args = ["convert", images, shards, "--val-fraction", "0.1", "--shards", "4", "--json",
                "--no-progress"]
        print("  $ recordflow " + " ".join(args))
        proc = subprocess.run([exe, *args], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr)
            return False
        summary = json.loads(proc.stdout)
    print(f"  converted {summary['records']} images in {summary['seconds']:.2f} s "
          f"({summary['images_per_second']:,.0f} images/s): "
          + ", ".join(f"{name} {s['records']} in {len(s['shards'])} "
                      f"shard{'s' if len(s['shards']) != 1 else ''}"
                      for name, s in summary["splits"].items())
          + f", skipped {summary['skipped_count']}")
    files = sorted(os.path.join(shards, f) for f in os.listdir(shards)
                   if f.endswith(".tfrecord"))
    rc = run_cli("verify", *files)
    spec = {"image/encoded": rf.FixedLen([], "bytes"),
            "image/class/label": rf.FixedLen([], "int64"),
            "image/class/text": rf.FixedLen([], "bytes"),
            "image/filename": rf.FixedLen([], "bytes")}
    seen = 0
    ok = rc in (None, 0)
    for path in files:
        batch = rf.RecordReader(path).read_batch(10_000)
        parsed = rf.parse_example(batch, spec)
        for enc, label, text, name in zip(parsed["image/encoded"], parsed["image/class/label"],
                                          parsed["image/class/text"], parsed["image/filename"]):
            cls = text.decode()
            original = os.path.join(images, cls, name.decode())
            with open(original, "rb") as f:
                ok &= f.read() == enc
            ok &= info["classes"][label] == cls
            seen += 1
    ok &= seen == info["images"]
    print(f"  read back {seen} records: original JPEG bytes and labels "
          + ("match" if ok else "DO NOT MATCH"))
    train = [f for f in files if os.path.basename(f).startswith("train-")]
    ok &= pipeline_demo(train, spec, summary["splits"]["train"]["records"])
    return ok


def pipeline_demo(files, spec, expected):
    """Streams the shards through rf.Dataset the way a training loop would, two epochs, and
    checks a mid-epoch checkpoint restores to the same batches."""
    print("\n   stream the train shards for training: rf.Dataset, 2 epochs")
    ds = (rf.Dataset.from_files(files, shuffle_files=True, seed=0)
          .interleave(cycle_length=2).shuffle(256, seed=0).repeat(2)
          .batch(32).parse(spec).prefetch())
    print("  " + ds.describe())
    t0 = time.perf_counter()
    labels = [b["image/class/label"].tolist() for b in ds]
    dt = time.perf_counter() - t0
    n = sum(len(x) for x in labels)
    ok = n == 2 * expected
    print(f"  {len(labels)} batches, {n} images ({n / dt:,.0f} images/s incl. start-up); "
          f"every image twice: {'yes' if ok else 'NO'}")
    it = ds.iterator(epoch=0)  # the iteration `labels` came from (each iteration reshuffles)
    for _ in range(len(labels) // 2):
        next(it)
    state = it.checkpoint()
    it.close()
    rest = [b["image/class/label"].tolist() for b in ds.restore(state)]
    same = rest == labels[len(labels) // 2:]
    print(f"  checkpoint after {len(labels) // 2} batches ({len(state)} bytes), restored: the "
          f"remaining {len(rest)} batches are {'identical' if same else 'DIFFERENT'}")
    return ok and same


def main(argv):
    out = argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="recordflow-demo-")
    os.makedirs(out, exist_ok=True)
    print(f"recordflow {rf.__version__} demo, output in {out}")
    print("\n0. an ImageNet-like image folder -> sharded TFRecords")
    convert_ok = convert_demo(out)
    plain = os.path.join(out, "demo.tfrecord")
    gz = os.path.join(out, "demo.tfrecord.gz")
    payloads = list(demo_payloads(NUM_RECORDS))
    total = sum(len(p) for p in payloads)
    print(f"\nrecords demo: {NUM_RECORDS} records, {total / 1e6:.1f} MB, "
          f"CRC32C backend: {rf.crc32c_backend()}")

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
    ok &= convert_ok
    print("\ndemo " + ("succeeded" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
