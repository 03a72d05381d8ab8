"""rf.vision.Compose against torchvision.transforms.v2 on the same parameters.

Inputs are PNG (decoded exactly by both sides) so that only the ops are compared. Tolerances
(documented in docs/image.md, "Composable ops"):
  exact: CenterCrop (padding included), Pad (all modes), flips, Rotate90, RandomRotation by a
    multiple of 90 degrees, output sizes of Resize (int, max_size, expand).
  Resize / RandomResizedCrop, bilinear (antialiased): |diff| <= 2 of 255, mean |diff| < 0.3;
    bicubic (either antialias) <= 2, mean < 0.05 (torchvision and Pillow); bilinear
    antialias=False <= 1, mean < 0.3.
  RandomRotation (nearest): at most 1% of pixels differ (rounding at exact .5 sample
    positions); bilinear: |diff| <= 2 of 255 at >= 99% of pixels.
  ToDtype / Normalize: 1e-5 relative (float32), float16 / bfloat16 to their precision.
  Boxes: 1e-3 pixel.
"""

import io
import pickle

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision_compat import ensure_torchvision

import recordflow as rf


def _import_torchvision():
    """torchvision.transforms.v2. scripts/setup.sh installs torchvision 0.28 beside the CPU
    torch 2.13, whose compiled ops (_C.so) want CUDA torch: then the package is loaded without
    its __init__ (which registers those ops); the transforms and tv_tensors are pure Python."""
    assert ensure_torchvision(), "torchvision is not installed (scripts/setup.sh --test)"
    from torchvision import tv_tensors
    from torchvision.transforms import v2
    from torchvision.transforms.v2 import functional
    return tv_tensors, v2, functional


tv_tensors, v2, F = _import_torchvision()

V = rf.vision


def _photo(h=180, w=240, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // w, y * 255 // h, (x * y) % 256], -1)
    img = np.clip(base + rng.normal(0, 25, (h, w, 3)), 0, 255).astype(np.uint8)
    img[h // 4: h // 2, w // 5: w // 2] = (250, 20, 30)  # an asymmetric feature
    return img


def _png(a):
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, "PNG")
    return buf.getvalue()


def _run(ops, images, layout="CHW", **kw):
    recs = [rf.Example({"image/encoded": _png(a), "image/class/label": i}).serialize()
            for i, a in enumerate(images)]
    op = V.Compose(ops, layout=layout, seed=kw.pop("seed", 0), **kw)
    return next(iter(rf.Dataset.from_records(recs).batch(len(recs)).map(op)))


def _tv(a):
    return torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1)


IMG = _photo()
IMG2 = _photo(157, 111, seed=1)


@pytest.mark.parametrize("size", [(100, 150), (224, 224), (300, 500), 96])
def test_resize_matches_torchvision(size):
    for img in (IMG, IMG2):
        got = _run([V.Resize(size)], [img])["image"][0] if not isinstance(size, int) else None
        if isinstance(size, int):
            # The shorter side: the size varies per image, so a CenterCrop fixes it; compare
            # the shape through Resize alone on each image.
            ref = F.resize(_tv(img), size, antialias=True)
            h, w = ref.shape[1:]
            got = _run([V.Resize(size), V.CenterCrop((h, w))], [img])["image"][0]
        else:
            ref = F.resize(_tv(img), list(size), antialias=True)
        assert got.shape == tuple(ref.shape)
        d = np.abs(got.astype(int) - ref.numpy().astype(int))
        assert d.max() <= 2 and d.mean() < 0.3, (size, d.max(), d.mean())


def _real_photos():
    from skimage import data  # scripts/setup.sh --test installs scikit-image
    return [data.astronaut(), data.coffee()]  # 512x512, 400x600


# (interpolation, antialias) -> (max |diff|, mean |diff|) against torchvision's tensor path
# (its native uint8 kernels: integer weights, horizontal pass first, rounded to uint8 between
# the passes, as recordflow's bicubic does; recordflow's weights are float).
_RESIZE_TOL = {("bicubic", True): (2, 0.05), ("bicubic", False): (2, 0.05),
               ("bilinear", False): (1, 0.3)}


@pytest.mark.parametrize("interp,antialias", sorted(_RESIZE_TOL))
@pytest.mark.parametrize("size", [(171, 203), (224, 224), (700, 900)])  # down, down, up
def test_resize_bicubic_and_no_antialias_match_torchvision_on_photos(interp, antialias, size):
    max_tol, mean_tol = _RESIZE_TOL[(interp, antialias)]
    for img in _real_photos():
        got = _run([V.Resize(size, interpolation=interp, antialias=antialias)], [img])["image"][0]
        ref = F.resize(_tv(img), list(size), interpolation=v2.InterpolationMode(interp),
                       antialias=antialias).numpy()
        assert got.shape == ref.shape
        d = np.abs(got.astype(int) - ref.astype(int))
        assert d.max() <= max_tol and d.mean() < mean_tol, (interp, antialias, size, d.max(),
                                                             d.mean())


@pytest.mark.parametrize("size", [(171, 203), (700, 900)])
def test_resize_bicubic_matches_pil_bicubic_on_photos(size):
    for img in _real_photos():
        got = _run([V.Resize(size, interpolation="bicubic")], [img], layout="HWC")["image"][0]
        ref = np.asarray(Image.fromarray(img).resize(size[::-1], Image.BICUBIC))
        d = np.abs(got.astype(int) - ref.astype(int))
        assert d.max() <= 2 and d.mean() < 0.02, (size, d.max(), d.mean())


def test_no_antialias_shrink_aliases_like_torchvision():
    # A one-pixel checkerboard shrunk 3x: antialiased filters average it to grey, the
    # unfiltered ones sample it (torchvision antialias=False), so the two must differ.
    board = ((np.indices((48, 48)).sum(0) % 2) * 255).astype(np.uint8)
    img = np.repeat(board[:, :, None], 3, 2)
    for interp in ("bilinear", "bicubic"):
        aa = _run([V.Resize((16, 16), interpolation=interp)], [img])["image"][0].astype(int)
        raw = _run([V.Resize((16, 16), interpolation=interp, antialias=False)],
                   [img])["image"][0].astype(int)
        ref = F.resize(_tv(img), [16, 16], interpolation=v2.InterpolationMode(interp),
                       antialias=False).numpy().astype(int)
        assert np.abs(aa - 127.5).max() <= 2, interp
        assert np.abs(raw - ref).max() <= 1, interp
        assert np.abs(raw - aa).max() > 50, interp


def test_random_resized_crop_bicubic_matches_resized_crop():
    h, w = IMG.shape[:2]
    r = w / h
    for aa in (True, False):
        got = _run([V.RandomResizedCrop((96, 128), scale=(1.0, 1.0), ratio=(r, r),
                                        interpolation="bicubic", antialias=aa)], [IMG],
                   dct_scaling=False)["image"][0]
        ref = F.resized_crop(_tv(IMG), 0, 0, h, w, [96, 128],
                             interpolation=v2.InterpolationMode.BICUBIC, antialias=aa).numpy()
        d = np.abs(got.astype(int) - ref.astype(int))
        assert d.max() <= 2 and d.mean() < 0.02, (aa, d.max(), d.mean())


def test_rotation_refuses_bicubic_as_torchvision_tensors_do():
    with pytest.raises(ValueError, match="nearest or bilinear"):
        V.RandomRotation(10, interpolation="bicubic")


def test_resize_output_sizes_match_torchvision_including_max_size():
    for img in (IMG, IMG2):
        for size, max_size in [(64, None), (100, 130), (111, None), (50, 60)]:
            ref = v2.Resize(size, max_size=max_size)(_tv(img))
            got = _run([V.Resize(size, max_size=max_size), V.CenterCrop(tuple(ref.shape[1:]))],
                       [img])["image"][0]
            d = np.abs(got.astype(int) - ref.numpy().astype(int))
            assert d.max() <= 2, (size, max_size, d.max())


def test_random_resized_crop_resample_matches_resized_crop():
    # scale (1, 1) at the image's own ratio: the crop is the whole image, so only the resample
    # (fused with the decode) is compared with F.resized_crop on the same box.
    h, w = IMG.shape[:2]
    r = w / h
    got = _run([V.RandomResizedCrop((96, 128), scale=(1.0, 1.0), ratio=(r, r))], [IMG],
               dct_scaling=False)["image"][0]
    ref = F.resized_crop(_tv(IMG), 0, 0, h, w, [96, 128], antialias=True).numpy()
    d = np.abs(got.astype(int) - ref.astype(int))
    assert d.max() <= 2 and d.mean() < 0.3, (d.max(), d.mean())


@pytest.mark.parametrize("size", [(100, 100), (180, 240), (200, 260), (50, 300), 64])
def test_center_crop_is_exactly_torchvision_padding_included(size):
    for img in (IMG, IMG2):
        got = _run([V.CenterCrop(size)], [img])["image"][0]
        ref = F.center_crop(_tv(img), size if isinstance(size, int) else list(size)).numpy()
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("padding", [3, (2, 5), (1, 2, 3, 4)])
def test_pad_is_exactly_torchvision(mode, padding):
    fill = (10, 200, 30) if mode == "constant" else 0
    got = _run([V.CenterCrop((40, 50)), V.Pad(padding, fill=fill, padding_mode=mode)], [IMG])
    ref = v2.Pad(padding, fill=fill, padding_mode=mode)(F.center_crop(_tv(IMG), [40, 50]))
    np.testing.assert_array_equal(got["image"][0], ref.numpy())


def test_flips_and_rot90_are_exactly_torchvision():
    base = F.center_crop(_tv(IMG2), [100, 80])
    cases = [
        ([V.RandomHorizontalFlip(p=1.0)], F.horizontal_flip(base)),
        ([V.RandomVerticalFlip(p=1.0)], F.vertical_flip(base)),
        ([V.RandomHorizontalFlip(p=0.0), V.RandomVerticalFlip(p=0.0)], base),
        ([V.Rotate90(1)], torch.rot90(base, 1, dims=(-2, -1))),
        ([V.Rotate90(3)], torch.rot90(base, 3, dims=(-2, -1))),
        ([V.RandomRotation((90, 90), expand=True)], F.rotate(base, 90, expand=True)),
        ([V.RandomRotation((180, 180))], F.rotate(base, 180)),
    ]
    for ops, ref in cases:
        got = _run([V.CenterCrop((100, 80))] + ops, [IMG2])["image"][0]
        np.testing.assert_array_equal(got, ref.numpy(), err_msg=repr(ops))


# (interpolation, fill) of the warps compared with torchvision's.
WARP_CASES = [("nearest", 0), ("bilinear", 0), ("bilinear", (255, 128, 0))]


def _tv_fill(fill):
    """A fill as torchvision's functional ops take it (a list for several channels)."""
    return list(fill) if isinstance(fill, tuple) else fill


def _assert_warp_matches(got, ref, interp: str, *context) -> None:
    """A warp (rotation, affine) against torchvision's: the same shape; at most 1 % of the
    pixels differ (nearest) or differ by more than 2 levels (bilinear) in any channel, as
    the sampling point's rounding may fall the other way at a few pixels."""
    assert got.shape == ref.shape, (*context, got.shape, ref.shape)
    d = np.abs(got.astype(int) - ref.astype(int))
    limit = 0 if interp == "nearest" else 2
    assert (d.max(axis=0) > limit).mean() <= 0.01, (*context, interp, d.max(),
                                                     (d.max(axis=0) > limit).mean())


@pytest.mark.parametrize("angle", [17.0, -33.5, 45.0, 120.0])
@pytest.mark.parametrize("expand", [False, True])
def test_rotation_matches_torchvision(angle, expand):
    base = F.center_crop(_tv(IMG), [90, 120])
    ref_shape = F.rotate(base, angle, expand=expand).shape
    crop = [V.CenterCrop((90, 120))]
    fix = [V.CenterCrop(tuple(ref_shape[1:]))] if expand else []
    for interp, fill in WARP_CASES:
        got = _run(crop + [V.RandomRotation((angle, angle), interpolation=interp, expand=expand,
                                            fill=fill)] + fix, [IMG])["image"][0]
        ref = F.rotate(base, angle, interpolation=v2.InterpolationMode(interp), expand=expand,
                       fill=_tv_fill(fill)).numpy()
        _assert_warp_matches(got, ref, interp, fill)


@pytest.mark.parametrize("center", [(10.0, 20.0), (119.5, 0.0), (-15.0, 100.0)])
@pytest.mark.parametrize("expand", [False, True])
def test_rotation_about_a_center_matches_torchvision(center, expand):
    """RandomRotation(center=(x, y)): torchvision's rotate with the same center, its expand
    size and placement included; same tolerances as about the image center."""
    base = F.center_crop(_tv(IMG), [90, 120])
    for angle in (23.0, -71.0):
        ref_shape = F.rotate(base, angle, expand=expand, center=list(center)).shape
        crop = [V.CenterCrop((90, 120))]
        fix = [V.CenterCrop(tuple(ref_shape[1:]))] if expand else []
        for interp, fill in [("nearest", 0), ("bilinear", (255, 128, 0))]:
            got = _run(crop + [V.RandomRotation((angle, angle), interpolation=interp,
                                                expand=expand, center=center, fill=fill)] + fix,
                       [IMG])["image"][0]
            ref = F.rotate(base, angle, interpolation=v2.InterpolationMode(interp),
                           expand=expand, center=list(center),
                           fill=_tv_fill(fill)).numpy()
            _assert_warp_matches(got, ref, interp, angle, expand)
    # Not the same as about the image center (the parameter is used, not dropped).
    plain = _run([V.CenterCrop((90, 120)), V.RandomRotation((23.0, 23.0))], [IMG])["image"][0]
    moved = _run([V.CenterCrop((90, 120)), V.RandomRotation((23.0, 23.0), center=center)],
                 [IMG])["image"][0]
    assert np.abs(plain.astype(int) - moved.astype(int)).mean() > 5
    with pytest.raises(ValueError, match="center"):
        V.Compose([V.RandomRotation(10, center=(float("nan"), 1.0))])


@pytest.mark.parametrize("dtype,scale", [("float32", True), ("float32", False), ("float16", True),
                                         ("bfloat16", True), ("uint8", True)])
def test_to_dtype_and_normalize_match_torchvision(dtype, scale):
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    norm = dtype != "uint8"
    ops = [V.CenterCrop(64), V.ToDtype(dtype, scale=scale)] + ([V.Normalize(mean, std)] if norm else [])
    got = _run(ops, [IMG])["image"][0]
    crop = F.center_crop(_tv(IMG), [64])
    if dtype == "uint8":  # ToDtype(uint8): the pixels themselves
        np.testing.assert_array_equal(got, crop.numpy())
        return
    ref = F.normalize(v2.ToDtype(torch.float32, scale=scale)(crop), mean, std).numpy()
    g = np.asarray(got).astype(np.float32) if dtype != "bfloat16" else \
        (np.asarray(got).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    # float16 / bfloat16: rounded to nearest even from the float32 result.
    tol = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    np.testing.assert_allclose(g, ref, rtol=tol, atol=tol * (1 if scale else 255))


def test_layout_hwc_is_the_transpose_of_chw():
    ops = [V.RandomResizedCrop(48), V.RandomHorizontalFlip(), V.ToDtype("float32", scale=True)]
    chw = _run(ops, [IMG, IMG2], seed=3)["image"]
    hwc = _run(ops, [IMG, IMG2], seed=3, layout="HWC")["image"]
    np.testing.assert_array_equal(chw, hwc.transpose(0, 3, 1, 2))


def test_boxes_follow_the_image_like_torchvision_bounding_boxes():
    h, w = IMG.shape[:2]
    boxes = np.array([[30, 40, 120, 100], [0, 0, 20, 20], [200, 150, 240, 180]], np.float32)
    ops_rf = [V.Resize((120, 160)), V.RandomHorizontalFlip(1.0), V.Pad((4, 6)),
              V.RandomRotation((30, 30)), V.CenterCrop((110, 150))]
    ops_tv = v2.Compose([v2.Resize((120, 160)), v2.RandomHorizontalFlip(1.0), v2.Pad([4, 6]),
                         v2.RandomRotation((30, 30)), v2.CenterCrop((110, 150))])
    rec = rf.Example({"image/encoded": _png(IMG), "image/class/label": 0,
                      "objects/bbox": (boxes / [w, h, w, h]).ravel().tolist()}).serialize()
    for fmt in ("normalized", "pixel"):
        op = V.Compose(ops_rf, boxes_key="objects/bbox", boxes_format="normalized", seed=0)
        out = next(iter(rf.Dataset.from_records([rec]).batch(1).map(op)))
        got = np.asarray(out["boxes"].values).reshape(-1, 4) * [150, 110, 150, 110]
        bb = tv_tensors.BoundingBoxes(torch.from_numpy(boxes), format="XYXY", canvas_size=(h, w))
        _, ref = ops_tv(_tv(IMG), bb)
        np.testing.assert_allclose(got, ref.numpy(), atol=1e-3)
        mask = np.asarray(out["boxes_mask"].values)
        area = (ref[:, 2] - ref[:, 0]) * (ref[:, 3] - ref[:, 1])
        assert mask.tolist() == (area > 0).int().tolist()
        del fmt


@pytest.mark.parametrize("expand", [False, True])
def test_boxes_follow_a_rotation_about_a_center(expand):
    """Boxes through RandomRotation(center=...): torchvision's BoundingBoxes to 1e-3 without
    expand; with expand, where torchvision 0.28 places boxes by the rotated corners' minimum
    and not where its own image puts the content, the box bounds the rotated content (the
    white rectangle it was drawn around) as the image shows it."""
    img = np.zeros((120, 160, 3), np.uint8)
    img[40:60, 30:70] = 255
    boxes = np.array([[30, 40, 70, 60]], np.float32)
    rot = dict(degrees=(30, 30), center=(40.0, 30.0), expand=expand)
    ops = [V.RandomRotation(**rot)] + ([] if expand else [V.CenterCrop((120, 160))])
    tv_img = v2.RandomRotation(**rot)(_tv(img))
    oh, ow = tv_img.shape[-2:]
    if expand:
        ops.append(V.CenterCrop((oh, ow)))  # fixes the (already known) size
    rec = rf.Example({"image/encoded": _png(img), "image/class/label": 0,
                      "objects/bbox": (boxes / [160, 120, 160, 120]).ravel().tolist()}).serialize()
    op = V.Compose(ops, boxes_key="objects/bbox", boxes_format="normalized", seed=0)
    out = next(iter(rf.Dataset.from_records([rec]).batch(1).map(op)))
    assert out["image"][0].shape[-2:] == (oh, ow)
    got = np.asarray(out["boxes"].values).reshape(-1, 4) * [ow, oh, ow, oh]
    ys, xs = np.nonzero(out["image"][0][0] > 128)
    content = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float64)
    np.testing.assert_allclose(got[0], content, atol=1.5)
    if not expand:
        bb = tv_tensors.BoundingBoxes(torch.from_numpy(boxes), format="XYXY",
                                      canvas_size=(120, 160))
        _, ref = v2.RandomRotation(**rot)(_tv(img), bb)
        np.testing.assert_allclose(got, ref.numpy(), atol=1e-3)


def test_pixel_boxes_and_multi_label_and_extra_keys():
    recs = []
    for i in range(5):
        recs.append(rf.Example({"image/encoded": _png(IMG2 if i % 2 else IMG), "id": b"img%d" % i,
                                "labels": list(range(i % 3 + 1)), "score": float(i),
                                "box": [10.0, 10.0, 50.0, 40.0]}).serialize())
    ds = rf.Dataset.from_records(recs).batch(5)
    op = V.Compose([V.CenterCrop(100), V.RandomHorizontalFlip(1.0)], label_key="labels",
                   label_mode="multi_hot", num_classes=4, boxes_key="box", boxes_format="pixel",
                   extra_keys={"id": rf.FixedLen((), "bytes"), "score": rf.FixedLen((), "float32")})
    out = next(iter(ds.map(op)))
    assert out["image"].shape == (5, 3, 100, 100)
    assert out["label"].dtype == np.float32 and out["label"].tolist()[2] == [1, 1, 1, 0]
    assert out["id"].tolist() == [b"img%d" % i for i in range(5)]
    np.testing.assert_array_equal(out["score"], np.arange(5, dtype=np.float32))
    # IMG (240 x 180) cropped at (70, 40): box -> (-60.. ) clipped: x 0..0 -> empty after flip.
    rows = [np.asarray(out["boxes"].values[s:e]) for s, e in
            zip(out["boxes"].row_splits[:-1], out["boxes"].row_splits[1:])]
    assert rows[0].tolist() == [100.0, 0.0, 100.0, 0.0] and out["boxes_mask"].values[0] == 0
    # IMG2 (111 x 157) cropped at (6, 28): box x 4..44, y 0..12 -> flip x 56..96.
    assert rows[1].tolist() == [56.0, 0.0, 96.0, 12.0] and out["boxes_mask"].values[1] == 1
    padded = V.Compose([V.CenterCrop(8)], label_key="labels", label_mode="padded", num_classes=3)
    assert next(iter(ds.map(padded)))["label"].tolist()[2] == [0, 1, 2]
    assert next(iter(ds.map(padded)))["label"].tolist()[0] == [0, -1, -1]


def test_deterministic_checkpointable_and_picklable(tmp_path):
    paths = []
    for f in range(2):
        p = str(tmp_path / f"d-{f}.tfrecord")
        with rf.RecordWriter(p) as w:
            for k in range(12):
                img = _photo(120 + 7 * k, 140 + 3 * k, seed=k + 20 * f)
                w.write(rf.Example({"image/encoded": _png(img),
                                    "image/class/label": k + 100 * f}).serialize())
        paths.append(p)
    op = V.Compose([V.RandomResizedCrop(40), V.RandomHorizontalFlip(), V.RandomRotation(20),
                    V.ToDtype("float32", scale=True), V.Normalize((0.5,) * 3, (0.25,) * 3)],
                   seed=7)
    ds = rf.Dataset.from_files(str(tmp_path / "d-*.tfrecord")).shuffle(8, seed=1).repeat(2) \
        .batch(6).map(op)
    a = list(ds)
    b = list(rf.Dataset.from_files(str(tmp_path / "d-*.tfrecord")).shuffle(8, seed=1).repeat(2)
             .batch(6).map(pickle.loads(pickle.dumps(op))))
    assert len(a) == len(b) == 8
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x["image"], y["image"])
        np.testing.assert_array_equal(x["label"], y["label"])
    # Epochs differ.
    first = {int(lab): im for bt in a[:4] for lab, im in zip(bt["label"], bt["image"])}
    second = {int(lab): im for bt in a[4:] for lab, im in zip(bt["label"], bt["image"])}
    assert any(not np.array_equal(first[k], second[k]) for k in first)
    # Checkpoint mid-epoch, restore: the same tensors.
    it = ds.iterator()
    next(it)
    next(it)
    state = it.checkpoint()
    rest = list(it)
    restored = list(ds.restore(state))
    assert len(rest) == len(restored) == 6
    for x, y in zip(rest, restored):
        np.testing.assert_array_equal(x["image"], y["image"])


def test_bad_parameters_raise_value_error_naming_the_op():
    cases = [
        (lambda: V.Compose([V.Resize(64)]), "varies per image"),
        (lambda: V.Compose([V.CenterCrop(8), V.Normalize((0, 0, 0), (1, 1, 1))]), "Normalize"),
        (lambda: V.Compose([V.RandomResizedCrop(8, scale=(0.9, 0.1))]), "RandomResizedCrop"),
        (lambda: V.Compose([V.ToDtype("float32"), V.CenterCrop(4)]), "CenterCrop"),
        (lambda: V.Compose([V.CenterCrop(8), V.RandomHorizontalFlip(2)]), r"p must be in"),
        (lambda: V.Compose([V.Resize(8, max_size=4), V.CenterCrop(4)]), "max_size"),
        (lambda: V.Resize(8, interpolation="lanczos"), "interpolation"),
        (lambda: V.Pad((1, 2, 3)), "padding"),
        (lambda: V.Compose([V.CenterCrop(4), V.Pad(1, padding_mode="wrap")]), "padding_mode"),
        (lambda: V.ToDtype("int32"), "dtype"),
        (lambda: V.RandomRotation(10, center=(1, 2, 3)), "center"),
        (lambda: V.Compose([V.CenterCrop(4)], label_mode="multi_hot"), "num_classes"),
    ]
    for make, match in cases:
        with pytest.raises(ValueError, match=match):
            make()
    with pytest.raises(TypeError, match="not an rf.vision op"):
        V.Compose([lambda x: x])


def test_corrupt_image_names_the_record_or_is_skipped():
    good = rf.Example({"image/encoded": _png(IMG), "image/class/label": 1, "id": b"a"}).serialize()
    bad = rf.Example({"image/encoded": _png(IMG)[:200], "image/class/label": 2,
                      "id": b"b"}).serialize()
    ds = rf.Dataset.from_records([good, bad, good]).batch(3)
    with pytest.raises(rf.DataLossError, match="record 1 of file #0"):
        list(ds.map(V.Compose([V.CenterCrop(16)])))
    op = V.Compose([V.CenterCrop(16)], on_corruption="skip", extra_keys={"id": rf.FixedLen((), "bytes")})
    out = list(ds.map(op))
    assert out[0]["image"].shape[0] == 2 and out[0]["label"].tolist() == [1, 1]
    assert out[0]["id"].tolist() == [b"a", b"a"]
    assert op.skipped_records == 1


# ---- photometric ops and policies in the chain (kernels: image/augment.h) ------------------

def test_photometric_ops_in_the_chain_match_torchvision():
    base = F.center_crop(_tv(IMG), [64, 80])
    cases = [
        ([V.ColorJitter(brightness=(1.4, 1.4))], F.adjust_brightness(base, 1.4)),
        ([V.ColorJitter(contrast=(0.6, 0.6))], F.adjust_contrast(base, 0.6)),
        ([V.ColorJitter(saturation=(1.7, 1.7))], F.adjust_saturation(base, 1.7)),
        ([V.ColorJitter(hue=(0.2, 0.2))], F.adjust_hue(base, 0.2)),
        ([V.Grayscale(3)], F.rgb_to_grayscale(base, num_output_channels=3)),
        ([V.RandomGrayscale(p=1.0)], F.rgb_to_grayscale(base, num_output_channels=3)),
        ([V.GaussianBlur(5, sigma=1.3)], F.gaussian_blur(base, [5, 5], [1.3, 1.3])),
    ]
    for ops, ref in cases:
        got = _run([V.CenterCrop((64, 80))] + ops, [IMG])["image"][0]
        d = np.abs(got.astype(int) - ref.numpy().astype(int))
        assert d.max() <= 1, (ops, d.max())


def test_random_erasing_and_policies_are_deterministic_and_change_the_image():
    crop = [V.CenterCrop((64, 80))]
    plain = _run(crop, [IMG, IMG2])["image"]
    erased = _run(crop + [V.RandomErasing(p=1.0, value=(255, 0, 255))], [IMG, IMG2], seed=4)["image"]
    for k in range(2):
        changed = np.any(erased[k] != plain[k], axis=0)
        ys, xs = np.nonzero(changed)
        # One rectangle, filled with the value; the rest untouched.
        box = erased[k][:, ys.min():ys.max() + 1, xs.min():xs.max() + 1]
        assert (box[0] == 255).all() and (box[1] == 0).all() and (box[2] == 255).all()
    for policy in (V.AutoAugment(), V.RandAugment(), V.TrivialAugmentWide()):
        a = _run(crop + [policy], [IMG, IMG2, IMG, IMG2], seed=5)["image"]
        b = _run(crop + [policy], [IMG, IMG2, IMG, IMG2], seed=5)["image"]
        np.testing.assert_array_equal(a, b)
        assert a.shape == (4, 3, 64, 80)
        assert any(not np.array_equal(a[k], np.concatenate([plain, plain])[k]) for k in range(4))
    with pytest.raises(ValueError, match="ColorJitter"):
        V.Compose(crop + [V.ColorJitter(hue=(0.2, 0.9))])
    with pytest.raises(ValueError, match="GaussianBlur"):
        V.Compose(crop + [V.GaussianBlur(4)])
    with pytest.raises(ValueError, match="RandomErasing"):
        V.Compose(crop + [V.ToDtype("float32", scale=True), V.RandomErasing()])



def test_random_erasing_value_random_is_normal_in_the_normalized_domain():
    # torchvision's value="random" fills N(0, 1) in the normalized domain; here the erase runs
    # on the 8-bit image, so each sample is round(255 * (mean + std * z)) for the Normalize
    # that follows: after it, the box holds z up to the 8-bit step and the clamp to 0..255.
    crop = [V.CenterCrop((96, 120))]
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    tail = [V.ToDtype("float32", scale=True), V.Normalize(mean, std)]
    numeric = _run(crop + [V.RandomErasing(p=1.0, scale=(0.3, 0.33), value=(255, 0, 255))],
                   [IMG, IMG2], seed=7)["image"]
    plain = _run(crop, [IMG, IMG2])["image"]
    rand = _run(crop + [V.RandomErasing(p=1.0, scale=(0.3, 0.33), value="random")] + tail,
                [IMG, IMG2], seed=7)["image"]
    again = _run(crop + [V.RandomErasing(p=1.0, scale=(0.3, 0.33), value="random")] + tail,
                 [IMG, IMG2], seed=7)["image"]
    other = _run(crop + [V.RandomErasing(p=1.0, scale=(0.3, 0.33), value="random")] + tail,
                 [IMG, IMG2], seed=8)["image"]
    np.testing.assert_array_equal(rand, again)
    assert not np.array_equal(rand, other)
    norm_plain = (plain.astype(np.float32) / 255 - np.array(mean, np.float32)[:, None, None]) \
        / np.array(std, np.float32)[:, None, None]
    for k in range(2):
        # The rectangle is the one a numeric value gets with the same seed (the fill's draws
        # come after the rectangle's).
        box = np.any(numeric[k] != plain[k], axis=0)
        ys, xs = np.nonzero(box)
        inside = np.zeros_like(box)
        inside[ys.min():ys.max() + 1, xs.min():xs.max() + 1] = True
        np.testing.assert_allclose(rand[k][:, ~inside], norm_plain[k][:, ~inside], atol=1e-5)
        z = rand[k][:, inside]
        assert z.size > 3 * 2000
        assert abs(float(z.mean())) < 0.05, z.mean()
        # The clamp at 0 and 255 (about -2.1 and +2.3 sigma here) trims the tails a little.
        assert 0.88 < float(z.std()) < 1.02, z.std()
        assert float(z.min()) < -1.9 and float(z.max()) > 2.0
        # Per channel, neither a constant nor a copy of another channel.
        assert min(float(z[c].std()) for c in range(3)) > 0.8
        assert not np.allclose(z[0], z[1])
    with pytest.raises(ValueError, match="RandomErasing.*Normalize"):
        V.Compose(crop + [V.RandomErasing(value="random"), V.ToDtype("float32", scale=True)])
    with pytest.raises(ValueError, match="RandomErasing"):
        V.RandomErasing(value="noise")

def test_mixup_and_cutmix_mix_each_batch_like_torchvision():
    imgs = [IMG, IMG2, IMG, IMG2]
    crop = [V.CenterCrop((48, 64))]
    plain = _run(crop, imgs, layout="HWC")["image"].astype(np.float64)
    labels = np.arange(4)
    for layout in ("HWC", "CHW"):
        out = _run(crop + [V.MixUp(alpha=0.4, num_classes=5)], imgs, layout=layout, seed=2)
        x = out["image"].astype(np.float64)
        if layout == "CHW":
            x = x.transpose(0, 2, 3, 1)
        soft = out["label"]
        assert soft.shape == (4, 5) and soft.dtype == np.float32
        lam = float(soft[0, 0])  # sample 0 keeps lam of its own class 0
        # torchvision: x = lam * x + (1 - lam) * x.roll(1, 0); labels likewise.
        ref = lam * plain + (1 - lam) * np.roll(plain, 1, axis=0)
        assert np.abs(x - ref).max() <= 1.0
        one_hot = np.eye(5)[labels]
        np.testing.assert_allclose(soft, lam * one_hot + (1 - lam) * np.roll(one_hot, 1, 0), atol=1e-6)
        cut = _run(crop + [V.CutMix(alpha=1.0, num_classes=5)], imgs, layout=layout, seed=3)
        c = cut["image"].astype(np.float64)
        if layout == "CHW":
            c = c.transpose(0, 2, 3, 1)
        pasted = np.any(c != plain, axis=(0, 3))
        rolled = np.roll(plain, 1, axis=0)
        # Every pixel is either the sample's own or the previous sample's (one box).
        assert np.all((c == plain) | (c == rolled))
        lam_c = float(cut["label"][0, 0])
        # The box: the extent of the pixels that changed (some pixels of the two photos agree).
        ys, xs = np.nonzero(pasted)
        area = 0.0 if ys.size == 0 else \
            (ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1) / pasted.size
        assert abs((1 - lam_c) - area) <= 0.02, (lam_c, area)
    with pytest.raises(ValueError, match="must come last"):
        V.Compose([V.MixUp(num_classes=3), V.CenterCrop(4)])
    with pytest.raises(ValueError, match="float32"):
        V.Compose(crop + [V.ToDtype("float16", scale=True), V.CutMix(num_classes=3)])
