"""`recordflow convert` / `rf.convert` and `recordflow extract` / `rf.extract`, checked with
TensorFlow reading the shards (tf.data.TFRecordDataset + tf.io.parse_single_example).

Images are generated at test time with Pillow: small, in several sizes, qualities, chroma
subsamplings, grayscale, CMYK, PNG, plus broken inputs.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
Image = pytest.importorskip("PIL.Image")

import recordflow as rf  # noqa: E402

CLASSES = ["cat", "dog", "eel", "fox"]
PER_CLASS = 12


def cli() -> str:
    # The CLI installed with this interpreter's package first: another one on PATH may be older.
    exe = os.path.join(os.path.dirname(sys.executable), "recordflow")
    if not os.path.exists(exe):
        exe = shutil.which("recordflow")
    assert exe, "the recordflow CLI is not installed"
    return exe


def run_cli(*args, check=None):
    proc = subprocess.run([cli(), *map(str, args)], capture_output=True, text=True)
    if check is not None:
        assert proc.returncode == check, proc.stdout + proc.stderr
    return proc


def jpeg_bytes(rng, w, h, mode="RGB", quality=90, subsampling=2):
    arr = rng.integers(0, 255, size=(h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
    img = Image.fromarray(arr).resize((w, h), Image.BILINEAR)  # smooth, photo-like blocks
    if mode != "RGB":
        img = img.convert(mode)
    buf = io.BytesIO()
    kwargs = {"quality": quality}
    if mode == "RGB":
        kwargs["subsampling"] = subsampling
    img.save(buf, "JPEG", **kwargs)
    return buf.getvalue()


def make_folder(root, classes=CLASSES, per_class=PER_CLASS, seed=0, size=(40, 90)):
    rng = np.random.default_rng(seed)
    truth = {}
    for c, name in enumerate(classes):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(per_class):
            w, h = (int(v) for v in rng.integers(size[0], size[1], 2))
            data = jpeg_bytes(rng, w, h, quality=int(rng.integers(75, 96)),
                              subsampling=int(rng.choice([0, 2])))
            fname = f"{name}_{i:03d}.jpg"
            with open(os.path.join(root, name, fname), "wb") as f:
                f.write(data)
            truth[fname] = {"label": c, "text": name, "bytes": data, "width": w, "height": h}
    return truth


FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/format": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    "image/channels": tf.io.FixedLenFeature([], tf.int64),
    "image/colorspace": tf.io.FixedLenFeature([], tf.string),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    "image/class/text": tf.io.FixedLenFeature([], tf.string),
    "image/filename": tf.io.FixedLenFeature([], tf.string),
}


def read_tf(paths, features=FEATURES, compression=""):
    out = []
    ds = tf.data.TFRecordDataset(sorted(paths), compression_type=compression)
    for rec in ds:
        ex = tf.io.parse_single_example(rec, features)
        out.append({k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in ex.items()})
    return out


def shards(dst, split):
    return sorted(p for p in glob.glob(os.path.join(dst, f"{split}-*-of-*.tfrecord*"))
                  if not p.endswith(".idx"))


def shard_files(dst):
    return sorted(p for p in glob.glob(os.path.join(dst, "*-of-*")) if not p.endswith(".json"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("src") / "images")
    return root, make_folder(root)


def test_every_image_once_labels_bytes_dims(folder, tmp_path):
    src, truth = folder
    dst = str(tmp_path / "out")
    proc = run_cli("convert", src, dst, "--val-fraction", "0.25", "--shards", "3", "--json",
                   check=0)
    summary = json.loads(proc.stdout)
    assert summary["records"] == len(truth) and summary["skipped"] == []
    assert [os.path.basename(p) for p in shards(dst, "train")] == [
        f"train-{i:05d}-of-00003.tfrecord" for i in range(3)]
    for p in shards(dst, "train") + shards(dst, "validation"):
        assert os.path.exists(p + ".idx")
    with open(os.path.join(dst, "labels.txt")) as f:
        assert f.read().splitlines() == CLASSES
    recs = read_tf(shards(dst, "train") + shards(dst, "validation"))
    names = [r["image/filename"].decode() for r in recs]
    assert sorted(names) == sorted(truth)  # every good image exactly once
    for r in recs:
        t = truth[r["image/filename"].decode()]
        assert r["image/encoded"] == t["bytes"]  # original bytes, unchanged
        assert r["image/class/label"] == t["label"]
        assert r["image/class/text"].decode() == t["text"]
        assert (r["image/width"], r["image/height"]) == (t["width"], t["height"])
        assert r["image/channels"] == 3 and r["image/format"] == b"JPEG"
        assert r["image/colorspace"] == b"RGB"
        assert tuple(tf.io.decode_jpeg(r["image/encoded"]).shape) == (t["height"], t["width"], 3)
    # Shuffled across shards: the first shard does not hold one class only.
    first = read_tf(shards(dst, "train")[:1])
    assert len({r["image/class/label"] for r in first}) > 1


def test_split_fraction_is_stratified(folder, tmp_path):
    src, truth = folder
    dst = str(tmp_path / "out")
    s = rf.convert(src, dst, val_fraction=0.25, seed=3, shards=2)
    for name in CLASSES:
        assert s["splits"]["validation"]["per_class"][name] == round(0.25 * PER_CLASS)
        assert s["splits"]["train"]["per_class"][name] == PER_CLASS - round(0.25 * PER_CLASS)
    val = read_tf(shards(dst, "validation"))
    counts = np.bincount([r["image/class/label"] for r in val], minlength=len(CLASSES))
    assert counts.tolist() == [3, 3, 3, 3]
    # Train and validation are disjoint.
    train = {r["image/filename"] for r in read_tf(shards(dst, "train"))}
    assert train.isdisjoint({r["image/filename"] for r in val})


def test_deterministic_across_threads_and_runs(folder, tmp_path):
    src, _ = folder
    outs = []
    for i, threads in enumerate([1, 4, 4]):
        dst = str(tmp_path / f"out{i}")
        rf.convert(src, dst, val_fraction=0.2, seed=7, shards=3, num_threads=threads)
        outs.append({os.path.basename(p): open(p, "rb").read() for p in shard_files(dst)})
    assert outs[0] == outs[1] == outs[2]
    other = str(tmp_path / "seed8")
    rf.convert(src, other, val_fraction=0.2, seed=8, shards=3)
    assert {os.path.basename(p): open(p, "rb").read() for p in shard_files(other)} != outs[0]


def test_label_offset_and_gzip(folder, tmp_path):
    src, truth = folder
    dst = str(tmp_path / "out")
    run_cli("convert", src, dst, "--label-offset", "1", "--compression", "GZIP", "--shards", "2",
            check=0)
    paths = shards(dst, "train")
    assert all(p.endswith(".tfrecord.gz") for p in paths)
    recs = read_tf(paths, compression="GZIP")
    assert len(recs) == len(truth)
    for r in recs:
        assert r["image/class/label"] == truth[r["image/filename"].decode()]["label"] + 1


def test_bad_inputs_are_skipped_and_listed(tmp_path):
    src = str(tmp_path / "src")
    truth = make_folder(src, classes=["a", "b"], per_class=4)
    good = open(os.path.join(src, "a", "a_000.jpg"), "rb").read()
    with open(os.path.join(src, "a", "truncated.jpg"), "wb") as f:
        f.write(good[: len(good) // 2])
    with open(os.path.join(src, "b", "notes.txt"), "w") as f:
        f.write("not an image")
    with open(os.path.join(src, "b", "garbage.jpg"), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0" + os.urandom(200))
    big = jpeg_bytes(np.random.default_rng(1), 400, 300)
    with open(os.path.join(src, "b", "huge.jpg"), "wb") as f:
        f.write(big)
    os.makedirs(os.path.join(src, "c_empty"))
    unreadable = os.path.join(src, "a", "unreadable.jpg")
    with open(unreadable, "wb") as f:
        f.write(good)
    os.chmod(unreadable, 0)
    os.symlink(os.path.join(src, "no-such-file.jpg"), os.path.join(src, "b", "dangling.jpg"))
    dst = str(tmp_path / "out")
    proc = run_cli("convert", src, dst, "--max-pixels", "100000", "--json")
    assert proc.returncode == 4, proc.stderr  # finished, but skipped inputs
    summary = json.loads(proc.stdout)
    reasons = {os.path.relpath(s["path"], src): s["reason"] for s in summary["skipped"]}
    assert "truncated" in reasons[os.path.join("a", "truncated.jpg")]
    assert "not an image" in reasons[os.path.join("b", "notes.txt")]
    assert reasons[os.path.join("b", "garbage.jpg")].startswith("DataLoss")
    assert "over the limit" in reasons[os.path.join("b", "huge.jpg")]
    assert "empty class folder" in reasons["c_empty"]
    assert reasons[os.path.join("b", "dangling.jpg")].startswith("NotFound")  # unreadable
    if os.geteuid() != 0:  # root reads anything
        assert "PermissionDenied" in reasons[os.path.join("a", "unreadable.jpg")]
    recs = read_tf(shards(dst, "train"))
    names = sorted(r["image/filename"].decode() for r in recs)
    expected = sorted(truth) + ([] if os.geteuid() != 0 else ["unreadable.jpg"])
    assert names == expected
    # The empty class keeps its label: labels are indices of all sorted class folders.
    assert open(os.path.join(dst, "labels.txt")).read().splitlines() == ["a", "b", "c_empty"]
    # --strict fails instead, naming the input.
    proc = run_cli("convert", src, str(tmp_path / "strict"), "--strict")
    assert proc.returncode != 0 and "strict" in proc.stderr


def test_strict_on_corrupt_file(tmp_path):
    src = str(tmp_path / "src")
    make_folder(src, classes=["a"], per_class=3)
    good = open(os.path.join(src, "a", "a_000.jpg"), "rb").read()
    with open(os.path.join(src, "a", "zz_cut.jpg"), "wb") as f:
        f.write(good[:100])
    proc = run_cli("convert", src, str(tmp_path / "out"), "--strict")
    assert proc.returncode == 3, proc.stderr  # DataLoss
    assert "zz_cut.jpg" in proc.stderr


def test_existing_output_needs_resume_or_overwrite(folder, tmp_path):
    src, _ = folder
    dst = str(tmp_path / "out")
    run_cli("convert", src, dst, check=0)
    proc = run_cli("convert", src, dst)
    assert proc.returncode == 1 and "AlreadyExists" in proc.stderr
    run_cli("convert", src, dst, "--overwrite", check=0)
    # Resuming with other options is refused.
    proc = run_cli("convert", src, dst, "--resume", "--seed", "5")
    assert proc.returncode == 1 and "different input or options" in proc.stderr


def test_resume_after_sigkill_gives_identical_bytes(tmp_path):
    src = str(tmp_path / "src")
    make_folder(src, classes=["a", "b", "c"], per_class=60, size=(300, 400))
    args = ["--val-fraction", "0.1", "--shards", "12", "--resize-shorter", "96", "--threads", "1",
            "--seed", "4"]
    ref = str(tmp_path / "ref")
    run_cli("convert", src, ref, *args, check=0)
    dst = str(tmp_path / "killed")
    state = os.path.join(dst, ".recordflow-convert")
    killed_mid_run = False
    for attempt in range(5):
        shutil.rmtree(dst, ignore_errors=True)
        proc = subprocess.Popen([cli(), "convert", src, dst, *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline and proc.poll() is None:
            done = glob.glob(os.path.join(state, "train-*.json"))
            if len(done) >= 2:
                break
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            killed_mid_run = True
            break
    assert killed_mid_run, "the conversion always finished before it could be killed"
    finished = glob.glob(os.path.join(state, "*.tfrecord.json"))
    assert 2 <= len(finished) < 14
    # Whatever exists under a final name is complete: it equals the reference shard.
    for p in shard_files(dst):
        assert open(p, "rb").read() == open(os.path.join(ref, os.path.basename(p)), "rb").read()
    proc = run_cli("convert", src, dst, *args, "--resume", "--json", check=0)
    summary = json.loads(proc.stdout)
    assert summary["resumed_shards"] >= 2
    assert summary["records"] == 180
    ref_files = {os.path.basename(p): open(p, "rb").read() for p in shard_files(ref)}
    got = {os.path.basename(p): open(p, "rb").read() for p in shard_files(dst)}
    assert got == ref_files
    assert not [f for f in os.listdir(dst) if ".tmp-" in f]  # no temporary files left


def test_extract_round_trip(folder, tmp_path):
    src, truth = folder
    dst = str(tmp_path / "out")
    rf.convert(src, dst, val_fraction=0.25, shards=2)
    out = str(tmp_path / "extracted")
    proc = run_cli("extract", *shards(dst, "train"), *shards(dst, "validation"), out, check=0)
    assert "extracted 48 images" in proc.stdout
    for name in CLASSES:
        for fname in os.listdir(os.path.join(out, name)):
            assert open(os.path.join(out, name, fname), "rb").read() == truth[fname]["bytes"]
            assert truth[fname]["text"] == name
    rows = list(csv.DictReader(open(os.path.join(out, "labels.csv"))))
    assert len(rows) == len(truth)
    for row in rows:
        fname = os.path.basename(row["path"])
        assert int(row["label"]) == truth[fname]["label"] and row["class"] == truth[fname]["text"]


def test_extract_contains_path_traversal(tmp_path):
    img = jpeg_bytes(np.random.default_rng(0), 16, 16)
    evil = [
        ("../../escape.jpg", "cls"),
        ("/etc/passwd", "cls"),
        ("..", "../../../outside"),
        ("a\x00b.jpg", "/abs/class"),
        ("sub/../../x.jpg", ".."),
        ("..\\..\\win.jpg", "c:\\evil"),
        ("", ""),
    ]
    path = str(tmp_path / "evil.tfrecord")
    with rf.RecordWriter(path) as w:
        for i, (fname, cls) in enumerate(evil):
            w.write(rf.Example({"image/encoded": img, "image/format": "JPEG",
                                "image/filename": fname.encode(), "image/class/text": cls.encode(),
                                "image/class/label": i}).serialize())
    box = tmp_path / "box"
    out = box / "out"
    os.makedirs(out)
    before = set(os.listdir(tmp_path))
    s = rf.extract(path, str(out))
    assert s["images"] == len(evil)
    assert set(os.listdir(tmp_path)) == before and os.listdir(box) == ["out"]
    written = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs]
    assert len(written) == len(evil) + 1  # + labels.csv
    root = os.path.realpath(out)
    for p in written:
        assert os.path.realpath(p).startswith(root + os.sep)
        assert "\x00" not in p
    # Each name is one component below one class folder.
    for row in csv.DictReader(open(out / "labels.csv")):
        parts = row["path"].split("/")
        assert len(parts) == 2 and ".." not in parts and "" not in parts


def test_manifests_csv_and_jsonl(tmp_path):
    src = str(tmp_path / "imgs")
    truth = make_folder(src, classes=["x", "y"], per_class=3)
    files = sorted(truth)
    with open(tmp_path / "m.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image", "label", "weight", "note"])
        for i, fname in enumerate(files):
            w.writerow([f"imgs/{fname[0]}/{fname}", "zebra" if i % 2 else "ant", i * 0.5,
                        f"note, {i}"])
    s = rf.convert(str(tmp_path / "m.csv"), str(tmp_path / "out_csv"))
    assert s["classes"] == ["ant", "zebra"] and s["records"] == len(files)
    spec = {"image/filename": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "image/class/text": tf.io.FixedLenFeature([], tf.string),
            "weight": tf.io.FixedLenFeature([], tf.float32),
            "note": tf.io.FixedLenFeature([], tf.string)}
    recs = read_tf(shards(str(tmp_path / "out_csv"), "train"), spec)
    for r in recs:
        i = files.index(os.path.basename(r["image/filename"].decode()))
        assert r["image/class/label"] == (1 if i % 2 else 0)
        assert r["image/class/text"] == (b"zebra" if i % 2 else b"ant")
        assert r["weight"] == pytest.approx(i * 0.5) and r["note"] == f"note, {i}".encode()
    with open(tmp_path / "m.jsonl", "w") as f:
        for i, fname in enumerate(files):
            f.write(json.dumps({"path": f"imgs/{fname[0]}/{fname}", "labels": [i % 3, 5],
                                "id": i}) + "\n")
    s = rf.convert(str(tmp_path / "m.jsonl"), str(tmp_path / "out_jsonl"))
    spec = {"image/class/label": tf.io.VarLenFeature(tf.int64),
            "id": tf.io.FixedLenFeature([], tf.int64)}
    recs = read_tf(shards(str(tmp_path / "out_jsonl"), "train"), spec)
    for r in recs:
        assert r["image/class/label"].values.numpy().tolist() == [r["id"] % 3, 5]


def test_formats_colorspaces_and_resize(tmp_path):
    rng = np.random.default_rng(5)
    src = tmp_path / "src" / "k"
    os.makedirs(src)
    rgb = Image.fromarray(rng.integers(0, 255, (50, 70, 3), dtype=np.uint8))
    rgb.save(src / "p.png")
    rgb.convert("L").save(src / "g.jpg", quality=90)
    rgb.convert("CMYK").save(src / "c.jpg", quality=90)
    rgb.save(src / "b.bmp")
    Image.fromarray(rng.integers(0, 255, (300, 200, 3), dtype=np.uint8)).save(src / "big.jpg")
    spec = dict(FEATURES)
    del spec["image/class/text"]
    s = rf.convert(str(tmp_path / "src"), str(tmp_path / "out"), shuffle=False, verify="decode")
    recs = {r["image/filename"].decode(): r for r in read_tf(shards(str(tmp_path / "out"), "train"), spec)}
    assert s["skipped"] == [] and s["transcoded"] == 2
    assert recs["p.png"]["image/format"] == b"JPEG" and recs["b.bmp"]["image/format"] == b"JPEG"
    assert tuple(tf.io.decode_jpeg(recs["p.png"]["image/encoded"]).shape) == (50, 70, 3)
    assert (recs["g.jpg"]["image/channels"], recs["g.jpg"]["image/colorspace"]) == (1, b"Gray")
    assert (recs["c.jpg"]["image/channels"], recs["c.jpg"]["image/colorspace"]) == (4, b"CMYK")
    rf.convert(str(tmp_path / "src"), str(tmp_path / "keep"), non_jpeg="keep", force_rgb=True,
               resize_shorter=100)
    recs = {r["image/filename"].decode(): r for r in read_tf(shards(str(tmp_path / "keep"), "train"), spec)}
    assert recs["p.png"]["image/format"] == b"PNG"
    assert recs["p.png"]["image/encoded"] == open(src / "p.png", "rb").read()
    for name in ("g.jpg", "c.jpg"):
        assert recs[name]["image/channels"] == 3
        assert tf.io.decode_jpeg(recs[name]["image/encoded"]).shape[2] == 3
    assert (recs["big.jpg"]["image/width"], recs["big.jpg"]["image/height"]) == (100, 150)
    assert tuple(tf.io.decode_jpeg(recs["big.jpg"]["image/encoded"]).shape) == (150, 100, 3)


def test_gif_webp_cmyk_pixels_match_reference_decoders(tmp_path):
    """Transcoded GIF / WebP / CMYK come out as the reference decoders (PIL, TF) see them."""
    src = tmp_path / "src" / "k"
    os.makedirs(src)
    y, x = np.mgrid[0:40, 0:48]
    smooth = np.stack([x * 5, y * 6, (x + y) * 3], axis=-1).astype(np.uint8)
    Image.fromarray(smooth).save(src / "g.gif")
    Image.fromarray(smooth).save(src / "w.webp", lossless=True)
    Image.new("RGB", (32, 32), (200, 100, 50)).convert("CMYK").save(src / "c.jpg", quality=95)
    s = rf.convert(str(tmp_path / "src"), str(tmp_path / "out"), force_rgb=True, quality=100)
    assert s["skipped"] == [] and s["transcoded"] == 3
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/filename": tf.io.FixedLenFeature([], tf.string)}
    recs = {r["image/filename"].decode(): tf.io.decode_jpeg(r["image/encoded"]).numpy().astype(int)
            for r in read_tf(shards(str(tmp_path / "out"), "train"), spec)}
    for name in ("g.gif", "w.webp"):
        reference = np.asarray(Image.open(src / name).convert("RGB"), dtype=int)
        assert recs[name].shape == reference.shape
        assert np.abs(recs[name] - reference).mean() < 3, name
    tf_cmyk = tf.io.decode_jpeg(open(src / "c.jpg", "rb").read(), channels=3).numpy().astype(int)
    assert np.abs(recs["c.jpg"] - tf_cmyk).max() <= 2


def test_python_inputs(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (20, 24, 32, 3), dtype=np.uint8)
    labels = np.arange(20) % 4
    s = rf.convert((images, labels), str(tmp_path / "np"), val_fraction=0.25, shards=2,
                   class_names=["a", "b", "c", "d"])
    assert s["splits"]["train"]["records"] == 16 and s["splits"]["validation"]["records"] == 4
    spec = {k: v for k, v in FEATURES.items() if k != "image/filename"}
    recs = read_tf(shards(str(tmp_path / "np"), "train") + shards(str(tmp_path / "np"), "validation"),
                   spec)
    assert sorted(r["image/class/label"] for r in recs) == sorted(labels.tolist())
    for r in recs:
        assert (r["image/height"], r["image/width"], r["image/channels"]) == (24, 32, 3)
        assert tuple(tf.io.decode_jpeg(r["image/encoded"]).shape) == (24, 32, 3)
    rows = ({"feature": [i, i + 1], "name": f"row{i}"} for i in range(10))
    rf.convert(rows, str(tmp_path / "rows"), shards=3)
    spec = {"feature": tf.io.FixedLenFeature([2], tf.int64),
            "name": tf.io.FixedLenFeature([], tf.string)}
    got = read_tf(shards(str(tmp_path / "rows"), "train"), spec)
    assert sorted(r["name"] for r in got) == sorted(f"row{i}".encode() for i in range(10))


def test_progress_callback_and_summary_file(folder, tmp_path):
    src, truth = folder
    calls = []
    s = rf.convert(src, str(tmp_path / "out"), progress=lambda *a: calls.append(a))
    assert calls and calls[-1][0] == calls[-1][1] == len(truth)
    on_disk = json.load(open(tmp_path / "out" / "summary.json"))
    assert on_disk["records"] == s["records"] == len(truth)


def test_summary_is_summary_json_for_every_source(folder, tmp_path):
    src, truth = folder
    native = rf.convert(src, str(tmp_path / "folder"), shards=2)
    assert native == json.load(open(tmp_path / "folder" / "summary.json"))
    rng = np.random.default_rng(1)
    images = rng.integers(0, 255, (12, 16, 20, 3), dtype=np.uint8)
    labels = np.arange(12) % 3
    python = rf.convert((images, labels), str(tmp_path / "np"), shards=2, val_fraction=0.25,
                        class_names=["a", "b", "c"])
    assert python == json.load(open(tmp_path / "np" / "summary.json"))
    assert list(python) == list(native)
    for split in ("train",):
        assert list(python["splits"][split]) == list(native["splits"][split])
        assert (list(python["splits"][split]["shards"][0])
                == list(native["splits"][split]["shards"][0]))
    assert python["splits"]["train"]["per_class"] == {"a": 3, "b": 3, "c": 3}
    assert python["records"] == 12 and python["inputs"] == 12 and python["transcoded"] == 12


def test_python_inputs_honour_or_refuse_every_option(tmp_path):
    rng = np.random.default_rng(2)
    good = jpeg_bytes(rng, 32, 24)
    rows = [{"image": good, "label": 0}, {"image": b"not an image", "label": 1},
            {"image": good, "label": 1}]
    for bad in (dict(resume=True), dict(image_column="x"), dict(label_column="y"),
                dict(label_separator="|")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            rf.convert(rows, str(tmp_path / "refused"), **bad)
    # strict: the unusable image fails the run; otherwise it is skipped and listed.
    with pytest.raises(rf.Error, match="item 1"):
        rf.convert(rows, str(tmp_path / "strict"), strict=True)
    s = rf.convert(rows, str(tmp_path / "lenient"))
    assert s["records"] == 2 and s["skipped_count"] == 1
    assert s["skipped"][0]["path"] == "item 1"
    assert s["skipped"][0]["reason"].startswith("InvalidArgument: ")
    # max_pixels, verify, resize_shorter, non_jpeg reach the native checks.
    s = rf.convert(rows[:1], str(tmp_path / "pixels"), max_pixels=100)
    assert s["records"] == 0 and s["skipped"][0]["reason"].startswith("ResourceExhausted")
    truncated = good[:-10]  # the end of the entropy-coded data and the end marker cut
    s = rf.convert([{"image": truncated}], str(tmp_path / "header"), verify="header")
    assert s["records"] == 1
    s = rf.convert([{"image": truncated}], str(tmp_path / "decode"), verify="decode")
    assert s["records"] == 0 and s["skipped"][0]["reason"].startswith("DataLoss")
    s = rf.convert(rows[:1], str(tmp_path / "resized"), resize_shorter=12)
    spec = {"image/height": tf.io.FixedLenFeature([], tf.int64),
            "image/width": tf.io.FixedLenFeature([], tf.int64)}
    (r,) = read_tf(shards(str(tmp_path / "resized"), "train"), spec)
    assert (r["image/height"], r["image/width"]) == (12, 16) and s["transcoded"] == 1
    # shard_size splits by bytes; progress is reported with the total.
    calls = []
    many = [{"image": good, "label": i % 2} for i in range(20)]
    s = rf.convert(many, str(tmp_path / "sized"), shard_size=len(good) * 5,
                   progress=lambda *a: calls.append(a))
    assert len(s["splits"]["train"]["shards"]) >= 3
    assert calls and calls[-1][:3] == (20, 20, 0)
    with pytest.raises(ValueError, match="shard_size"):
        rf.convert(many, str(tmp_path / "zero"), shard_size=0)


def test_python_inputs_are_streamed_not_held(tmp_path):
    import tracemalloc

    payload = 256 << 10
    rows = ({"payload": bytes([i % 251]) * payload, "label": i % 3} for i in range(200))
    tracemalloc.start()
    try:
        s = rf.convert(rows, str(tmp_path / "big"), shards=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert s["records"] == 200
    # 200 records of 256 KiB = 50 MiB; a streaming writer holds a few at a time.
    assert peak < 12 << 20, peak


def test_python_inputs_overwrite_replaces_only_a_complete_output(tmp_path):
    dst = str(tmp_path / "out")
    rf.convert([{"name": f"old{i}", "label": 0} for i in range(4)], dst, shards=2)
    with open(os.path.join(dst, "README.txt"), "w") as f:
        f.write("mine")
    before = {n: open(os.path.join(dst, n), "rb").read() for n in sorted(os.listdir(dst))
              if os.path.isfile(os.path.join(dst, n))}

    def failing():
        yield {"name": "new0", "label": 0}
        raise RuntimeError("source failed mid-way")

    with pytest.raises(RuntimeError, match="mid-way"):
        rf.convert(failing(), dst, shards=1, overwrite=True)
    after = {n: open(os.path.join(dst, n), "rb").read() for n in sorted(os.listdir(dst))
             if os.path.isfile(os.path.join(dst, n))}
    assert after == before
    assert [n for n in os.listdir(tmp_path) if n != "out"] == []  # no staging folder left
    s = rf.convert([{"name": "new0", "label": 0}], dst, shards=1, overwrite=True)
    assert s["records"] == 1
    assert sorted(n for n in os.listdir(dst) if n.startswith("train-")) == [
        "train-00000-of-00001.tfrecord", "train-00000-of-00001.tfrecord.idx"]
    assert open(os.path.join(dst, "README.txt")).read() == "mine"


def test_python_inputs_use_the_native_plan(tmp_path):
    """Python rows go through the native converter's planner: the same images, labels and
    seed as an image folder land in the same split, shard and order, and the spool beside
    the output is gone afterwards."""
    rng = np.random.default_rng(5)
    classes = ["a", "b", "c"]
    rows = []
    for i in range(18):
        data = jpeg_bytes(rng, 24, 16)
        label = i % 3
        # Folder items are listed by class, then name: name them so that order is row order.
        folder = tmp_path / "src" / classes[label]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.jpg").write_bytes(data)
        rows.append({"image": data, "label": label, "filename": f"{i:03d}.jpg"})
    rows.sort(key=lambda r: (r["label"], r["filename"]))
    options = dict(shards=2, val_fraction=0.34, seed=11)
    native = rf.convert(str(tmp_path / "src"), str(tmp_path / "folder"), **options)
    python = rf.convert(rows, str(tmp_path / "rows"), class_names=classes, **options)
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
            "image/class/text": tf.io.FixedLenFeature([], tf.string)}
    for split in ("train", "validation"):
        assert python["splits"][split]["per_class"] == native["splits"][split]["per_class"]
        folder_shards, row_shards = shards(str(tmp_path / "folder"), split), shards(
            str(tmp_path / "rows"), split)
        assert [os.path.basename(p) for p in folder_shards] == [
            os.path.basename(p) for p in row_shards]
        for a, b in zip(folder_shards, row_shards):
            assert read_tf([a], spec) == read_tf([b], spec), (split, a)
    assert sorted(os.listdir(tmp_path)) == ["folder", "rows", "src"]  # no spool left
