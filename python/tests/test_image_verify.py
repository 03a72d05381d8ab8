"""`convert --verify structure` (the default) against files whose structure lies: a JPEG header
claiming far more pixels than its scan holds, a JPEG with no scan, and truncated or CRC-broken
PNG, GIF and BMP files kept as they are (``non_jpeg="keep"``). Each is skipped and listed with a
DataLoss reason; the good files are stored and TensorFlow decodes them."""

from __future__ import annotations

import io
import os
import struct
import zlib

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
Image = pytest.importorskip("PIL.Image")

import recordflow as rf  # noqa: E402


def _save(a, fmt, **kw):
    b = io.BytesIO()
    Image.fromarray(a).save(b, fmt, **kw)
    return b.getvalue()


def _with_jpeg_size(jpeg: bytes, width: int, height: int) -> bytes:
    sof = jpeg.index(b"\xff\xc0")
    return jpeg[:sof + 5] + struct.pack(">HH", height, width) + jpeg[sof + 9:]


def _png_flip_crc(png: bytes, chunk: bytes) -> bytes:
    at = png.index(chunk)
    length = struct.unpack(">I", png[at - 4:at])[0]
    crc_at = at + 4 + length
    return png[:crc_at] + bytes([png[crc_at] ^ 1]) + png[crc_at + 1:]


def _read(dst):
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/filename": tf.io.FixedLenFeature([], tf.string)}
    files = sorted(str(p) for p in dst.glob("train-*.tfrecord"))
    return {r["image/filename"].numpy().decode(): r["image/encoded"].numpy()
            for r in tf.data.TFRecordDataset(files).map(
                lambda s: tf.io.parse_single_example(s, spec))}


def test_structure_verify_skips_lying_and_broken_files(tmp_path):
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 255, (40, 60, 3), dtype=np.uint8)
    jpeg = _save(pixels, "JPEG", quality=90)
    png = _save(pixels, "PNG")
    gif = _save(pixels[..., 0] // 64, "GIF")
    bmp = _save(pixels, "BMP")
    good = {"good.jpg": jpeg, "good.png": png, "good.gif": gif, "good.bmp": bmp}
    sos = jpeg.index(b"\xff\xda")
    # A scan cut to less than its 2,800 blocks need (at least one bit each), end marker glued on.
    big = _save(rng.integers(0, 255, (300, 400, 3), dtype=np.uint8), "JPEG", quality=90)
    big_sos = big.index(b"\xff\xda")
    bad = {
        "lying_8000.jpg": _with_jpeg_size(jpeg, 8000, 8000),
        "no_scan.jpg": jpeg[:sos] + b"\xff\xd9",
        "cut_scan.jpg": big[:big_sos + 14 + 200] + b"\xff\xd9",
        "truncated.png": png[:len(png) - 30],
        "crc.png": _png_flip_crc(png, b"IDAT"),
        "truncated.gif": gif[:len(gif) - 20],
        "truncated.bmp": bmp[:len(bmp) - 100],
    }
    src = tmp_path / "src" / "k"
    os.makedirs(src)
    for name, data in {**good, **bad}.items():
        (src / name).write_bytes(data)
    for verify in ("structure", None):  # None: the default
        dst = tmp_path / f"out_{verify}"
        kw = {} if verify is None else {"verify": verify}
        s = rf.convert(str(tmp_path / "src"), str(dst), non_jpeg="keep", shuffle=False, **kw)
        reasons = {os.path.basename(x["path"]): x["reason"] for x in s["skipped"]}
        assert sorted(reasons) == sorted(bad), reasons
        for name, reason in reasons.items():
            assert reason.startswith("DataLoss"), (name, reason)
        assert "8000x8000" in reasons["lying_8000.jpg"]
        assert "CRC" in reasons["crc.png"]
        stored = _read(dst)
        assert sorted(stored) == sorted(good)
        for name, data in good.items():
            assert stored[name] == data  # kept as they are
            tf.io.decode_image(stored[name])  # and TensorFlow decodes them
    # Header-only verification stores them (the documented cheap level).
    s = rf.convert(str(tmp_path / "src"), str(tmp_path / "hdr"), non_jpeg="keep",
                   verify="header")
    assert {os.path.basename(x["path"]) for x in s["skipped"]} <= set(bad)
    assert "lying_8000.jpg" not in {os.path.basename(x["path"]) for x in s["skipped"]}


def test_convert_transcodes_16bit_and_gamma_pngs_to_tensorflow_values(tmp_path):
    """convert's PNG -> JPEG transcoding starts from tf.io.decode_png's values (no gamma)."""
    y, x = np.mgrid[0:48, 0:64]
    smooth16 = np.stack([x * 1000, y * 1300, (x + y) * 500], -1).astype(np.uint16)
    smooth8 = (smooth16 >> 8).astype(np.uint8)
    png16 = tf.io.encode_png(smooth16).numpy()
    png8 = tf.io.encode_png(smooth8).numpy()
    gamma = struct.pack(">I", 100000)  # gAMA 1.0: "linear" samples
    gamma_chunk = (struct.pack(">I", 4) + b"gAMA" + gamma +
                   struct.pack(">I", zlib.crc32(b"gAMA" + gamma) & 0xFFFFFFFF))
    png8_gamma = png8[:33] + gamma_chunk + png8[33:]
    src = tmp_path / "src" / "k"
    os.makedirs(src)
    files = {"rgb16.png": png16, "rgb8_gamma.png": png8_gamma}
    for name, data in files.items():
        (src / name).write_bytes(data)
    s = rf.convert(str(tmp_path / "src"), str(tmp_path / "out"), shuffle=False)
    assert s["skipped"] == [] and s["transcoded"] == 2
    stored = _read(tmp_path / "out")
    for name, data in files.items():
        want = tf.io.decode_png(data, channels=3).numpy().astype(np.float64)
        got = tf.io.decode_jpeg(stored[name]).numpy().astype(np.float64)
        # JPEG at quality 95 of a smooth image: within a couple of levels (a gamma or
        # linear-light conversion is ~50 off).
        assert np.abs(got - want).mean() < 2.0, (name, np.abs(got - want).mean())
