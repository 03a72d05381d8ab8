"""rf.vision against Pillow, TensorFlow and torchvision's documented sampling algorithm."""

import io
import math

import numpy as np
import pytest

import recordflow as rf

Image = pytest.importorskip("PIL.Image")


def _photos():
    """Real photographs when scikit-image is installed, else textured synthetic images."""
    try:
        from skimage import data
        imgs = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket()]
    except Exception:  # pragma: no cover - fallback
        rng = np.random.default_rng(0)
        imgs = []
        for h, w in [(375, 500), (400, 300), (333, 480), (427, 640)]:
            y, x = np.mgrid[0:h, 0:w]
            base = np.stack([x * 255 // w, y * 255 // h, (x + y) % 256], -1)
            imgs.append(np.clip(base + rng.integers(-20, 20, base.shape), 0, 255).astype(np.uint8))
    return [np.ascontiguousarray(i[..., :3]) for i in imgs]


def _jpeg(a, quality=90, subsampling=2, progressive=False):
    b = io.BytesIO()
    Image.fromarray(a).save(b, "JPEG", quality=quality, subsampling=subsampling,
                            progressive=progressive)
    return b.getvalue()


def _psnr(a, b):
    err = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if err == 0 else 10 * math.log10(255.0 ** 2 / err)


PHOTOS = _photos()


@pytest.mark.parametrize("subsampling,progressive", [(2, False), (1, False), (0, False), (2, True)])
def test_decode_matches_pillow_and_fused_crop_equals_full_decode_then_crop(subsampling, progressive):
    src = PHOTOS[0]
    jpg = _jpeg(src, subsampling=subsampling, progressive=progressive)
    full = rf.vision.decode_image(jpg)
    pil = np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB"))
    assert full.shape == pil.shape
    assert _psnr(full, pil) >= 45  # both are libjpeg-turbo (Pillow may bundle another version)
    h, w = full.shape[:2]
    for x, y, cw, ch in [(0, 0, w, h), (16, 32, 64, 48), (17, 3, 101, 211), (w - 9, h - 7, 9, 7),
                         (w // 3, h // 5, w // 2, h // 2)]:
        px, box, denom = rf.vision.decode_region(jpg, crop=(x, y, cw, ch))
        assert denom == 1 and box == (0.0, 0.0, float(cw), float(ch))
        np.testing.assert_array_equal(px, full[y:y + ch, x:x + cw])


def test_gray_and_png_decode_to_rgb():
    gray = PHOTOS[1].mean(axis=2).astype(np.uint8)
    jpg = _jpeg(gray)
    out = rf.vision.decode_image(jpg)
    assert out.shape == gray.shape + (3,)
    ref = np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB"))
    assert _psnr(out, ref) >= 45
    b = io.BytesIO()
    Image.fromarray(PHOTOS[2]).save(b, "PNG")
    np.testing.assert_array_equal(rf.vision.decode_image(b.getvalue()), PHOTOS[2])


def test_dct_scaled_region_is_close_to_full_decode_resize():
    src = PHOTOS[0]  # 512 x 512
    jpg = _jpeg(src)
    crop = (40, 60, 400, 420)
    px, box, denom = rf.vision.decode_region(jpg, crop=crop, target_size=(100, 100))
    assert denom == 4
    fused = rf.vision.resize(px, (100, 100), box=box)
    full = rf.vision.decode_image(jpg)
    x, y, w, h = crop
    ref = np.asarray(Image.fromarray(full).resize((100, 100), Image.BILINEAR,
                                                  box=(x, y, x + w, y + h)))
    assert _psnr(fused, ref) >= 30


def test_corrupt_truncated_and_non_image_data_raise_clear_errors():
    jpg = _jpeg(PHOTOS[0])
    with pytest.raises(rf.InvalidArgumentError, match="not an image"):
        rf.vision.decode_image(b"definitely not pixels")
    with pytest.raises(rf.DataLossError, match="corrupt JPEG"):
        rf.vision.decode_image(jpg[: len(jpg) // 2])
    with pytest.raises(rf.ResourceExhaustedError):
        rf.vision.decode_image(jpg, max_pixels=1000)


_PIL_MODES = {"bilinear": "BILINEAR", "area": "BOX", "nearest": "NEAREST"}


@pytest.mark.parametrize("size", [(224, 224), (100, 150), (37, 61), (700, 640)])
def test_nearest_equals_pillow_except_at_exact_ties(size):
    # Both take the input pixel under the output pixel's center, floor(box0 + (x + 0.5) * scale).
    # Pillow accumulates that coordinate in floating point, so where it is exactly an integer
    # (a tie between two pixels) it may land one pixel lower; elsewhere the results are equal.
    # (PSNR is no measure here: one pixel of shift in textured photos costs 10+ dB.)
    for src in PHOTOS[:2]:
        h, w = src.shape[:2]
        ours = rf.vision.resize(src, size, "nearest")
        ref = np.asarray(Image.fromarray(src).resize((size[1], size[0]), Image.NEAREST))
        tie_rows = np.array([((2 * y + 1) * h) % (2 * size[0]) == 0 for y in range(size[0])])
        tie_cols = np.array([((2 * x + 1) * w) % (2 * size[1]) == 0 for x in range(size[1])])
        differs = (ours != ref).any(axis=-1)
        assert not (differs & ~(tie_rows[:, None] | tie_cols[None, :])).any()


@pytest.mark.parametrize("mode", ["bilinear"])
@pytest.mark.parametrize("size", [(224, 224), (100, 150), (37, 61), (700, 640)])
def test_resize_within_40db_of_pillow(mode, size):
    for src in PHOTOS[:2]:
        ours = rf.vision.resize(src, size, mode)
        ref = np.asarray(Image.fromarray(src).resize((size[1], size[0]),
                                                     getattr(Image, _PIL_MODES[mode])))
        assert ours.shape == ref.shape
        assert _psnr(ours, ref) >= 40, (mode, size)


def test_area_resize_within_40db_of_pillow_box_at_integer_factors():
    # Pillow has no area mode: its BOX filter weighs whole input pixels by their centers, which
    # equals area averaging (fractional coverage, OpenCV INTER_AREA / TF "area") only when the
    # factor is an integer. Non-integer factors are compared with TensorFlow below.
    for src in PHOTOS[:2]:
        h, w = src.shape[:2]
        for f in (2, 4):
            ours = rf.vision.resize(src, (h // f, w // f), "area")
            ref = np.asarray(Image.fromarray(src).resize((w // f, h // f), Image.BOX))
            assert _psnr(ours, ref) >= 40, f


@pytest.mark.parametrize("mode,tf_method,antialias", [("bilinear", "bilinear", True),
                                                      ("area", "area", False),
                                                      ("nearest", "nearest", False)])
def test_resize_within_40db_of_tensorflow(mode, tf_method, antialias):
    tf = pytest.importorskip("tensorflow")
    src = PHOTOS[1]
    for size in [(224, 224), (150, 100), (37, 61), (700, 640)]:
        ours = rf.vision.resize(src, size, mode).astype(np.float64)
        ref = tf.image.resize(src, size, method=tf_method, antialias=antialias).numpy()
        ref = np.clip(np.round(ref), 0, 255)
        assert _psnr(ours, ref) >= 40, (mode, size)


def test_flip_center_crop_and_normalize_are_exact():
    src = PHOTOS[2]
    np.testing.assert_array_equal(rf.vision.flip_left_right(src), src[:, ::-1])
    h, w = src.shape[:2]
    c = rf.vision.center_crop(src, 224)
    top, left = int(round((h - 224) / 2)), int(round((w - 224) / 2))
    np.testing.assert_array_equal(c, src[top:top + 224, left:left + 224])
    mean, std = np.array(rf.vision.IMAGENET_MEAN), np.array(rf.vision.IMAGENET_STD)
    ref = (c.astype(np.float64) / 255 - mean) / std
    out = rf.vision.normalize(c)
    assert out.dtype == np.float32 and out.shape == c.shape
    np.testing.assert_allclose(out, ref, atol=2e-6)
    chw = rf.vision.normalize(c, layout="CHW", flip=True)
    np.testing.assert_allclose(chw, ref[:, ::-1].transpose(2, 0, 1), atol=2e-6)
    f16 = rf.vision.normalize(c, dtype="float16")
    np.testing.assert_array_equal(f16, out.astype(np.float16))
    u8 = rf.vision.normalize(c, dtype="uint8")
    np.testing.assert_array_equal(u8, c)
    bf = rf.vision.normalize(c, dtype="bfloat16")
    bits = bf.view(np.uint16) if bf.dtype != np.uint16 else bf
    x = out.view(np.uint32).astype(np.uint64)
    want = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(bits, want)


def test_simd_backends_equal_the_scalar_reference():
    src = PHOTOS[3]
    results = {}
    try:
        for backend in ["scalar", "sse2", "avx2"]:
            try:
                rf.vision.set_kernel_backend(backend)
            except rf.Error:
                continue
            results[backend] = (rf.vision.resize(src, (224, 224)),
                                rf.vision.resize(src, (97, 301), "area"),
                                rf.vision.normalize(src[:64, :64], layout="CHW", flip=True))
    finally:
        rf.vision.set_kernel_backend("auto")
    ref = results.pop("scalar")
    for backend, outs in results.items():
        for a, b in zip(outs, ref):
            np.testing.assert_array_equal(a, b, err_msg=backend)


# ---- RandomResizedCrop: torchvision's documented algorithm, re-implemented here ------------

def _torchvision_get_params(width, height, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """transforms.RandomResizedCrop.get_params, from its documentation and source semantics."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            i = int(rng.integers(0, height - h + 1))
            j = int(rng.integers(0, width - w + 1))
            return j, i, w, h
    in_ratio = width / height
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def _ks_2samp(a, b):
    a, b = np.sort(a), np.sort(b)
    allv = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, allv, side="right") / len(a)
    cdf_b = np.searchsorted(b, allv, side="right") / len(b)
    return np.max(np.abs(cdf_a - cdf_b))


@pytest.mark.parametrize("width,height", [(500, 375), (300, 1000), (2000, 150)])
def test_random_resized_crop_distribution_matches_torchvision(width, height):
    n = 20000
    ours = rf.vision.random_resized_crop_params(width, height, n=n, seed=123)
    rng = np.random.default_rng(7)
    ref = np.array([_torchvision_get_params(width, height, rng) for _ in range(n)])
    assert (ours[:, 0] >= 0).all() and (ours[:, 0] + ours[:, 2] <= width).all()
    assert (ours[:, 1] >= 0).all() and (ours[:, 1] + ours[:, 3] <= height).all()
    # Two-sample Kolmogorov-Smirnov on x, y, w, h, area and aspect: the critical value at
    # alpha = 1e-4 is 2.15 * sqrt(2 / n).
    crit = 2.15 * math.sqrt(2.0 / n)
    ours_f = ours.astype(np.float64)
    ref_f = ref.astype(np.float64)
    for name, a, b in [("x", ours_f[:, 0], ref_f[:, 0]), ("y", ours_f[:, 1], ref_f[:, 1]),
                       ("w", ours_f[:, 2], ref_f[:, 2]), ("h", ours_f[:, 3], ref_f[:, 3]),
                       ("area", ours_f[:, 2] * ours_f[:, 3], ref_f[:, 2] * ref_f[:, 3]),
                       ("aspect", ours_f[:, 2] / ours_f[:, 3], ref_f[:, 2] / ref_f[:, 3])]:
        d = _ks_2samp(a, b)
        assert d < crit, f"{name}: KS D = {d:.4f} >= {crit:.4f}"
    # The fallback (center crop) happens as often.
    fb = ((width - ours[:, 2]) // 2 == ours[:, 0]) & ((height - ours[:, 3]) // 2 == ours[:, 1])
    fb_ref = ((width - ref[:, 2]) // 2 == ref[:, 0]) & ((height - ref[:, 3]) // 2 == ref[:, 1])
    p = fb_ref.mean()
    assert abs(fb.mean() - p) < 5 * math.sqrt(max(p * (1 - p), 1e-4) / n) + 1e-3


# ---- presets in the pipeline ---------------------------------------------------------------

def _write_dataset(tmp_path, n=70):
    paths = []
    per_file = (n + 1) // 2
    k = 0
    for f in range(2):
        path = str(tmp_path / f"train-{f:05d}.tfrecord")
        with rf.RecordWriter(path) as w:
            for _ in range(per_file):
                if k >= n:
                    break
                src = PHOTOS[k % len(PHOTOS)]
                jpg = _jpeg(src[: 300 + (k % 5) * 20, : 400 - (k % 3) * 30])
                w.write(rf.Example({"image/encoded": jpg, "image/class/label": k}).serialize())
                k += 1
        paths.append(path)
    return paths


def test_end_to_end_imagenet_train_batches(tmp_path):
    paths = _write_dataset(tmp_path)
    ds = rf.Dataset.from_files(str(tmp_path / "train-*.tfrecord")).batch(32).map(
        rf.vision.imagenet_train(224, seed=3))
    batches = list(ds)
    assert [b["image"].shape for b in batches] == [(32, 224, 224, 3), (32, 224, 224, 3),
                                                   (6, 224, 224, 3)]
    assert batches[0]["image"].dtype == np.float32
    assert batches[0]["label"].dtype == np.int64
    np.testing.assert_array_equal(np.concatenate([b["label"] for b in batches]), np.arange(70))
    img = batches[0]["image"]
    assert img.min() >= -2.2 and img.max() <= 2.7 and img.std() > 0.3
    again = list(rf.Dataset.from_files(str(tmp_path / "train-*.tfrecord")).batch(32).map(
        rf.vision.imagenet_train(224, seed=3)))  # a fresh Dataset: the same first epoch
    for a, b in zip(batches, again):
        np.testing.assert_array_equal(a["image"], b["image"])
    # CHW float16, and map before batch.
    ds16 = rf.Dataset.from_files(paths).map(
        rf.vision.imagenet_train(64, seed=3, dtype="float16", layout="CHW")).batch(16)
    first = next(iter(ds16))
    assert first["image"].shape == (16, 3, 64, 64) and first["image"].dtype == np.float16


def test_imagenet_eval_matches_pillow_resize_then_center_crop(tmp_path):
    src = PHOTOS[1]  # 400 x 600
    jpg = _jpeg(src)
    ex = rf.Example({"image/encoded": jpg, "image/class/label": 5}).serialize()
    full = np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB"))
    h, w = full.shape[:2]
    rh, rw = (256, int(256 * w / h)) if h <= w else (int(256 * h / w), 256)
    resized = np.asarray(Image.fromarray(full).resize((rw, rh), Image.BILINEAR))
    top, left = int(round((rh - 224) / 2)), int(round((rw - 224) / 2))
    ref = resized[top:top + 224, left:left + 224]
    for dct, floor in [(False, 40), (True, 30)]:
        op = rf.vision.imagenet_eval(224, 256, dtype="uint8", dct_scaling=dct)
        out = next(iter(rf.Dataset.from_records([ex]).batch(1).map(op)))
        assert out["label"].tolist() == [5]
        assert _psnr(out["image"][0], ref) >= floor, dct
    op = rf.vision.imagenet_eval(224, 256)
    out = next(iter(rf.Dataset.from_records([ex]).batch(1).map(op)))
    mean, std = np.array(rf.vision.IMAGENET_MEAN), np.array(rf.vision.IMAGENET_STD)
    back = np.clip((out["image"][0] * std + mean) * 255, 0, 255)
    assert _psnr(back, ref) >= 30


def test_corrupt_record_error_names_the_record_or_is_skipped():
    good = rf.Example({"image/encoded": _jpeg(PHOTOS[0]), "image/class/label": 1}).serialize()
    bad = rf.Example({"image/encoded": _jpeg(PHOTOS[0])[:500], "image/class/label": 2}).serialize()
    ds = rf.Dataset.from_records([good, bad, good]).batch(3)
    with pytest.raises(rf.DataLossError, match="record 1 of file #0"):
        list(ds.map(rf.vision.imagenet_train(32)))
    op = rf.vision.imagenet_train(32, on_corruption="skip")
    out = list(ds.map(op))
    assert out[0]["image"].shape[0] == 2 and out[0]["label"].tolist() == [1, 1]
    assert op.skipped_records == 1


def test_checkpoint_restore_with_the_train_preset_continues_with_the_same_tensors(tmp_path):
    _write_dataset(tmp_path, n=40)
    ds = (rf.Dataset.from_files(str(tmp_path / "train-*.tfrecord")).shuffle(16, seed=1).repeat(2)
          .batch(8).map(rf.vision.imagenet_train(32, seed=5)))
    it = ds.iterator()
    next(it)
    next(it)
    state = it.checkpoint()
    rest = [b for b in it]
    restored = [b for b in ds.restore(state)]
    assert len(rest) == len(restored) == 8
    for a, b in zip(rest, restored):
        np.testing.assert_array_equal(a["label"], b["label"])
        np.testing.assert_array_equal(a["image"], b["image"])
    # The two epochs crop the same records differently.
    full = list(ds)
    first = {int(l): img for b in full[:5] for l, img in zip(b["label"], b["image"])}
    second = {int(l): img for b in full[5:] for l, img in zip(b["label"], b["image"])}
    assert any(not np.array_equal(first[k], second[k]) for k in first)


# ---- PNG decoding exactly as tf.io.decode_png (no gamma, 16 -> 8 bits by the high byte) ------

def _png_chunks(png: bytes, chunks) -> bytes:
    """Inserts (type, data) chunks right after IHDR."""
    import struct
    import zlib
    end = 8 + 8 + 13 + 4
    extra = b"".join(struct.pack(">I", len(d)) + t + d +
                     struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF) for t, d in chunks)
    return png[:end] + extra + png[end:]


def _png_cases():
    import struct
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(11)
    enc = lambda a: tf.io.encode_png(a).numpy()  # noqa: E731
    u16 = lambda c: rng.integers(0, 65536, (23, 17, c), dtype=np.uint16)  # noqa: E731
    u8 = lambda c: rng.integers(0, 256, (23, 17, c), dtype=np.uint8)  # noqa: E731
    gamma22 = (b"gAMA", struct.pack(">I", 45455))
    gamma10 = (b"gAMA", struct.pack(">I", 100000))
    pal = Image.fromarray(u8(1)[..., 0] % 9).convert("P")
    pal.putpalette([v for i in range(9) for v in (i * 28, 255 - i * 20, (i * 91) % 256)])
    b = io.BytesIO()
    pal.save(b, "PNG")
    palette = b.getvalue()
    b = io.BytesIO()
    pal.save(b, "PNG", transparency=bytes(range(0, 250, 30)))
    palette_trns = b.getvalue()
    return {
        "gray16": enc(u16(1)),
        "rgb16": enc(u16(3)),
        "rgba16": enc(u16(4)),
        "gray_alpha16": enc(u16(2)),
        "gray_alpha8": enc(u8(2)),
        "palette": palette,
        "palette_trns": palette_trns,
        "rgb8_gamma22": _png_chunks(enc(u8(3)), [gamma22]),
        "rgb8_gamma10": _png_chunks(enc(u8(3)), [gamma10]),
        "rgb16_gamma22": _png_chunks(enc(u16(3)), [gamma22]),
        "gray8_gamma22": _png_chunks(enc(u8(1)), [gamma22]),
    }


@pytest.mark.parametrize("name", ["gray16", "rgb16", "rgba16", "gray_alpha16", "gray_alpha8",
                                  "palette", "palette_trns", "rgb8_gamma22", "rgb8_gamma10",
                                  "rgb16_gamma22", "gray8_gamma22"])
def test_png_decode_equals_tensorflow_decode_png(name):
    tf = pytest.importorskip("tensorflow")
    data = _png_cases()[name]
    # channels=4 adds an opaque alpha to images without one; TF's is (1 << bit depth) - 1 of
    # the file (15 for this 4-bit palette), recordflow's the full 255 / 65535 (docs/image.md).
    for channels in (0, 3) if name == "palette" else (0, 3, 4):
        for dtype, tf_dtype in (("uint8", tf.uint8), ("uint16", tf.uint16)):
            want = tf.io.decode_png(data, channels=channels, dtype=tf_dtype).numpy()
            got = rf.vision.decode_image(data, channels=channels, dtype=dtype)
            assert got.dtype == want.dtype and got.shape == want.shape, (channels, dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {channels} {dtype}")
    # The default (RGB uint8) and the region decoder the presets use give the same values.
    want = tf.io.decode_png(data, channels=3).numpy()
    np.testing.assert_array_equal(rf.vision.decode_image(data), want)
    pixels, box, denom = rf.vision.decode_region(data, crop=(2, 3, 10, 12))
    np.testing.assert_array_equal(pixels, want[3:15, 2:12])


def test_presets_decode_a_16bit_png_as_its_high_bytes():
    # The preset on a 16-bit PNG equals the preset on the 8-bit PNG of TF's decoded values.
    tf = pytest.importorskip("tensorflow")
    data = _png_cases()["rgb16_gamma22"]
    as8 = tf.io.encode_png(tf.io.decode_png(data, channels=3)).numpy()
    outs = []
    for png in (data, as8):
        ex = rf.Example({"image/encoded": png, "image/class/label": 1}).serialize()
        op = rf.vision.imagenet_eval(16, 18, dtype="uint8")
        outs.append(next(iter(rf.Dataset.from_records([ex]).batch(1).map(op)))["image"])
    np.testing.assert_array_equal(outs[0], outs[1])


def test_decode_image_dtype_and_channels_arguments():
    a = PHOTOS[0][:20, :30]
    jpg = _jpeg(a)
    u8 = rf.vision.decode_image(jpg)
    u16 = rf.vision.decode_image(jpg, dtype="uint16")
    assert u16.dtype == np.uint16
    np.testing.assert_array_equal(u16, u8.astype(np.uint16) * 257)  # TF's convert_image_dtype
    assert rf.vision.decode_image(jpg, channels=1).shape == (20, 30, 1)
    with pytest.raises(ValueError):
        rf.vision.decode_image(jpg, dtype="float32")


# ---- crop windows: every invalid window is an error, as in TensorFlow ------------------------

@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_invalid_crop_windows_raise_like_tensorflow(fmt):
    tf = pytest.importorskip("tensorflow")
    a = PHOTOS[0][:20, :30]
    b = io.BytesIO()
    Image.fromarray(a).save(b, fmt)
    data = b.getvalue()
    jpg = _jpeg(a)
    # (x, y, width, height)
    bad = [(0, 0, 0, 5), (0, 0, 5, 0), (0, 0, -5, 5), (-1, 0, 5, 5), (0, -1, 5, 5),
           (30, 0, 1, 1), (0, 20, 1, 1), (0, 15, 5, 10), (25, 0, 10, 5), (0, 0, 31, 20)]
    for x, y, w, h in bad:
        with pytest.raises(rf.InvalidArgumentError) as e:
            rf.vision.decode_region(data, crop=(x, y, w, h))
        assert "30x20" in str(e.value) and f"width={w}" in str(e.value)
        # TensorFlow refuses the same window.
        with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
            tf.io.decode_and_crop_jpeg(jpg, [y, x, h, w]).numpy()
        with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
            tf.image.crop_to_bounding_box(a, y, x, h, w)
    pixels, _, _ = rf.vision.decode_region(jpg, crop=(29, 19, 1, 1), dct_scaling=False)
    np.testing.assert_array_equal(pixels, tf.io.decode_and_crop_jpeg(
        jpg, [19, 29, 1, 1], dct_method="INTEGER_ACCURATE").numpy())


# ---- CPU limits: GIF frames and progressive scans ----------------------------------------------

def _gif_huge_frame(screen=(1, 1), frame=(65535, 65535)):
    import struct
    gif = b"GIF89a" + struct.pack("<HH", *screen) + b"\xf1\x00\x00"
    gif += b"\x00\x00\x00\xff\x00\x00\x00\xff\x00\x00\x00\xff"
    gif += b"\x2c" + struct.pack("<HHHH", 0, 0, *frame) + b"\x00"
    return gif + b"\x02\x02\x4c\x01\x00\x3b"


def test_gif_frame_limits_raise_quickly():
    import time
    t0 = time.perf_counter()
    with pytest.raises(rf.ResourceExhaustedError, match="65535x65535"):
        rf.vision.decode_image(_gif_huge_frame(), max_pixels=1000)
    with pytest.raises(rf.ResourceExhaustedError, match="logical screen"):
        rf.vision.decode_image(_gif_huge_frame((2, 2), (4096, 4096)))
    assert time.perf_counter() - t0 < 1.0


def test_progressive_jpeg_scan_limit():
    # Pillow writes 10 scans: a limit of 5 refuses it, the default (500) decodes it.
    jpg = _jpeg(PHOTOS[0][:64, :64], progressive=True)
    assert rf.vision.decode_image(jpg).shape == (64, 64, 3)
    with pytest.raises(rf.ResourceExhaustedError, match="more than 5 scans"):
        rf.vision.decode_image(jpg, max_scans=5)
    with pytest.raises(rf.ResourceExhaustedError, match="more than 5 scans"):
        rf.vision.decode_region(jpg, crop=(0, 0, 8, 8), max_scans=5)


def test_resize_box_and_center_crop_outside_the_image_name_window_and_size():
    a = PHOTOS[0][:20, :30]
    for box in [(25, 0, 10, 5), (-1, 0, 5, 5), (0, 0, 0, 5), (0, 18, 5, 5)]:
        with pytest.raises(rf.InvalidArgumentError) as e:
            rf.vision.resize(a, (5, 5), box=box)
        assert "30x20" in str(e.value) and f"x={box[0]}" in str(e.value)
    with pytest.raises(rf.InvalidArgumentError, match="30x20"):
        rf.vision.center_crop(a, (21, 10))
    assert rf.vision.resize(a, (5, 5), box=(20, 10, 10, 10)).shape == (5, 5, 3)
