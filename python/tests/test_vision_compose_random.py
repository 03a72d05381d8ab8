"""rf.vision.Compose's RandomInvert, RandomPosterize, RandomSolarize, RandomAdjustSharpness,
RandomAutocontrast, RandomEqualize and RandomAffine against torchvision.transforms.v2 on the
same parameters (helpers and images from test_vision_compose.py).

Tolerances (docs/image.md, "Composable ops"): the photometric ops at p=1 within 1 grey level of
torchvision's kernels, exactly the input at p=0; RandomAffine as RandomRotation (nearest: at
most 1% of pixels differ; bilinear: |diff| <= 2 at >= 99% of pixels); boxes 1e-3 pixel.
"""

import numpy as np
import pytest
import torch
from test_vision_compose import (
    IMG,
    IMG2,
    WARP_CASES,
    F,
    V,
    _assert_warp_matches,
    _png,
    _run,
    _tv,
    _tv_fill,
    tv_tensors,
    v2,
)

import recordflow as rf

CROP = [V.CenterCrop((64, 80))]
BASE = F.center_crop(_tv(IMG), [64, 80])

PHOTOMETRIC = [
    (lambda p: V.RandomInvert(p), lambda x: F.invert(x)),
    (lambda p: V.RandomPosterize(3, p), lambda x: F.posterize(x, 3)),
    (lambda p: V.RandomSolarize(100, p), lambda x: F.solarize(x, 100)),
    (lambda p: V.RandomAdjustSharpness(2.5, p), lambda x: F.adjust_sharpness(x, 2.5)),
    (lambda p: V.RandomAdjustSharpness(0.3, p), lambda x: F.adjust_sharpness(x, 0.3)),
    (lambda p: V.RandomAutocontrast(p), lambda x: F.autocontrast(x)),
    (lambda p: V.RandomEqualize(p), lambda x: F.equalize(x)),
]


@pytest.mark.parametrize("make,ref", PHOTOMETRIC)
def test_random_photometric_ops_match_torchvision_at_p1_and_are_identity_at_p0(make, ref):
    got = _run(CROP + [make(1.0)], [IMG])["image"][0]
    d = np.abs(got.astype(int) - ref(BASE).numpy().astype(int))
    assert d.max() <= 1, (make(1.0), d.max())
    assert (got != BASE.numpy()).any()  # the op changed the image
    same = _run(CROP + [make(0.0)], [IMG])["image"][0]
    np.testing.assert_array_equal(same, BASE.numpy())


def test_random_photometric_ops_apply_with_probability_p_per_record():
    n, p = 400, 0.3
    imgs = [IMG2[:16, :16]] * n
    got = _run([V.CenterCrop((16, 16)), V.RandomInvert(p)], imgs)["image"]
    inverted = np.array([np.array_equal(g, 255 - _tv(imgs[0]).numpy()) for g in got])
    untouched = np.array([np.array_equal(g, _tv(imgs[0]).numpy()) for g in got])
    assert (inverted | untouched).all()
    # Binomial(400, 0.3): mean 120, sd 9.2; five sd either side.
    assert 74 <= inverted.sum() <= 166, inverted.sum()
    again = _run([V.CenterCrop((16, 16)), V.RandomInvert(p)], imgs)["image"]
    np.testing.assert_array_equal(got, again)  # deterministic per record and seed
    other = _run([V.CenterCrop((16, 16)), V.RandomInvert(p)], imgs, seed=1)["image"]
    assert not np.array_equal(got, other)


AFFINES = [  # (angle, scale, shear x, shear y)
    (20.0, 1.0, 0.0, 0.0),
    (0.0, 0.8, 0.0, 0.0),
    (0.0, 1.0, 15.0, 0.0),
    (-35.0, 1.2, 10.0, -8.0),
]


@pytest.mark.parametrize("angle,scale,sx,sy", AFFINES)
def test_random_affine_matches_torchvision_affine(angle, scale, sx, sy):
    for interp, fill in WARP_CASES:
        op = V.RandomAffine((angle, angle), scale=(scale, scale), shear=(sx, sx, sy, sy),
                            interpolation=interp, fill=fill)
        got = _run(CROP + [op], [IMG])["image"][0]
        ref = F.affine(BASE, angle=angle, translate=[0, 0], scale=scale, shear=[sx, sy],
                       interpolation=v2.InterpolationMode(interp), fill=_tv_fill(fill)).numpy()
        _assert_warp_matches(got, ref, interp, angle, fill)


def test_random_affine_about_a_center_matches_torchvision():
    op = V.RandomAffine((25, 25), shear=(10, 10), center=(10.0, 50.0))
    got = _run(CROP + [op], [IMG])["image"][0]
    ref = F.affine(BASE, angle=25.0, translate=[0, 0], scale=1.0, shear=[10.0, 0.0],
                   center=[10.0, 50.0]).numpy()
    d = np.abs(got.astype(int) - ref.astype(int))
    assert (d.max(axis=0) > 0).mean() <= 0.01


def test_random_affine_translation_is_whole_pixels_within_the_fraction():
    fx, fy = 0.05, 0.1
    seen = set()
    for seed in range(6):
        got = _run(CROP + [V.RandomAffine(0, translate=(fx, fy))], [IMG], seed=seed)["image"][0]
        match = [(tx, ty) for tx in range(-4, 5) for ty in range(-7, 8)
                 if np.array_equal(got, F.affine(BASE, angle=0.0, translate=[tx, ty], scale=1.0,
                                                 shear=[0.0, 0.0]).numpy())]
        assert len(match) >= 1, seed  # exactly torchvision's affine by a whole-pixel shift
        tx, ty = match[0]
        assert abs(tx) <= fx * 80 and abs(ty) <= fy * 64
        seen.add(match[0])
    assert len(seen) > 1  # the shift is drawn per seed


def test_random_affine_boxes_follow_the_image_like_torchvision_bounding_boxes():
    h, w = IMG.shape[:2]
    boxes = np.array([[30, 40, 120, 100], [0, 0, 20, 20], [200, 150, 240, 180]], np.float32)
    rec = rf.Example({"image/encoded": _png(IMG), "image/class/label": 0,
                      "objects/bbox": (boxes / [w, h, w, h]).ravel().tolist()}).serialize()
    for angle, scale, sx, sy in AFFINES:
        ops = [V.RandomAffine((angle, angle), scale=(scale, scale), shear=(sx, sx, sy, sy))]
        # The CenterCrop to the input's size fixes the output size (an identity crop here).
        op = V.Compose(ops + [V.CenterCrop((h, w))], boxes_key="objects/bbox", seed=0)
        out = next(iter(rf.Dataset.from_records([rec]).batch(1).map(op)))
        got = np.asarray(out["boxes"].values).reshape(-1, 4) * [w, h, w, h]
        bb = tv_tensors.BoundingBoxes(torch.from_numpy(boxes), format="XYXY", canvas_size=(h, w))
        tv = v2.RandomAffine((angle, angle), scale=(scale, scale), shear=(sx, sx, sy, sy))
        _, ref = tv(_tv(IMG), bb)
        np.testing.assert_allclose(got, ref.numpy(), atol=1e-3)


def test_bad_parameters_of_the_random_ops_raise_value_error_naming_the_op():
    cases = [
        (lambda: V.RandomInvert(1.5), "p must be in"),
        (lambda: V.Compose([V.CenterCrop(8), V.RandomPosterize(9, p=1.0)]), "RandomPosterize"),
        (lambda: V.Compose([V.CenterCrop(8), V.RandomSolarize(300)]), "threshold"),
        (lambda: V.Compose([V.CenterCrop(8), V.RandomAdjustSharpness(-1)]), "sharpness_factor"),
        (lambda: V.RandomAffine(-5), "non-negative"),
        (lambda: V.RandomAffine(5, shear=(1, 2, 3)), "shear"),
        (lambda: V.Compose([V.CenterCrop(8), V.RandomAffine(5, translate=(2, 0))]), "translate"),
        (lambda: V.Compose([V.CenterCrop(8), V.RandomAffine(5, shear=95)]), "shear"),
        (lambda: V.Compose([V.CenterCrop(8), V.RandomAffine(5, scale=(0, 1))]), "scale"),
        (lambda: V.RandomAffine(5, interpolation="bicubic"), "interpolation"),
    ]
    for make, match in cases:
        with pytest.raises(ValueError, match=match):
            make()
