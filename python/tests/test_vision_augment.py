"""rf.vision.functional against torchvision.transforms.v2 (same parameters, uint8 images).

Tolerances (max abs difference per sample, uint8):
  exact (0): brightness, saturation, hue, grayscale, posterize, solarize, invert, autocontrast,
    equalize, erase, sharpness, translate (integer shift), policies' op sequences.
  1: contrast (the image mean is summed in another order), gaussian_blur (separable float32
    passes instead of one 2-D convolution), bilinear affine (float32 grid arithmetic).
  nearest affine (shear, rotate): at most 1% of pixels differ (source coordinates on a
    rounding tie, computed in another float32 order); the others are equal.

torchvision 0.28's compiled ops (_C.so) are linked against CUDA torch; the transforms are pure
Python over torch, so `tv` loads torchvision.transforms.v2 without torchvision/__init__ (which
registers the compiled ops) when the plain import fails beside the CPU torch.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torchvision_compat import ensure_torchvision

import recordflow as rf

assert ensure_torchvision(), "torchvision is not installed (scripts/setup.sh --test)"
import torchvision.transforms.v2 as T  # noqa: E402
import torchvision.transforms.v2.functional as F  # noqa: E402
from torchvision.transforms import InterpolationMode  # noqa: E402

fn = rf.vision.functional


def _image(h=37, w=53, c=3, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 / w), (y * 255 / h), ((x + y) * 127 / (w + h))], axis=-1)[..., :c]
    noise = rng.integers(-40, 41, size=(h, w, c))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1).contiguous()


def _np(t):
    return t.permute(1, 2, 0).contiguous().numpy()


def _diff(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    return int(np.abs(a.astype(np.int32) - b.astype(np.int32)).max())


IMG = _image()
IMG_BIG = _image(96, 128, seed=1)


@pytest.mark.parametrize("factor", [0.0, 0.3, 1.0, 1.7])
def test_brightness_saturation_exact(factor):
    assert _diff(fn.adjust_brightness(IMG, factor), _np(F.adjust_brightness(_t(IMG), factor))) == 0
    assert _diff(fn.adjust_saturation(IMG, factor), _np(F.adjust_saturation(_t(IMG), factor))) == 0


@pytest.mark.parametrize("factor", [0.0, 0.5, 1.8])
def test_contrast_within_one(factor):
    assert _diff(fn.adjust_contrast(IMG_BIG, factor),
                 _np(F.adjust_contrast(_t(IMG_BIG), factor))) <= 1


@pytest.mark.parametrize("factor", [-0.5, -0.2, 0.0, 0.1, 0.45])
def test_hue_exact(factor):
    assert _diff(fn.adjust_hue(IMG_BIG, factor), _np(F.adjust_hue(_t(IMG_BIG), factor))) == 0


@pytest.mark.parametrize("factor", [0.0, 0.4, 1.9])
def test_sharpness_exact(factor):
    assert _diff(fn.adjust_sharpness(IMG, factor), _np(F.adjust_sharpness(_t(IMG), factor))) == 0


@pytest.mark.parametrize("n", [1, 3])
def test_grayscale_exact(n):
    assert _diff(fn.rgb_to_grayscale(IMG, n), _np(F.rgb_to_grayscale(_t(IMG), n))) == 0


def test_pointwise_ops_exact():
    for bits in range(0, 9):
        assert _diff(fn.posterize(IMG, bits), _np(F.posterize(_t(IMG), bits))) == 0
    for thr in [0, 100, 128.5, 255]:
        assert _diff(fn.solarize(IMG, thr), _np(F.solarize(_t(IMG), thr))) == 0
    assert _diff(fn.invert(IMG), _np(F.invert(_t(IMG)))) == 0
    assert _diff(fn.autocontrast(IMG), _np(F.autocontrast(_t(IMG)))) == 0
    assert _diff(fn.equalize(IMG_BIG), _np(F.equalize(_t(IMG_BIG)))) == 0
    flat = np.full((9, 9, 3), 17, np.uint8)  # no stretch possible: unchanged
    assert _diff(fn.autocontrast(flat), flat) == 0 and _diff(fn.equalize(flat), flat) == 0


@pytest.mark.parametrize("ks,sigma", [((3, 3), (0.5, 0.5)), ((7, 5), (2.0, 1.1)), ((9, 9), (3.0, 3.0))])
def test_gaussian_blur_within_one(ks, sigma):
    ours = fn.gaussian_blur(IMG, ks, sigma)
    theirs = _np(F.gaussian_blur(_t(IMG), list(ks), list(sigma)))
    assert _diff(ours, theirs) <= 1


def test_erase_exact():
    ours = fn.erase(IMG, 3, 5, 10, 7, v=[1, 2, 3])
    theirs = _np(F.erase(_t(IMG), 3, 5, 10, 7, torch.tensor([1, 2, 3]).view(3, 1, 1)))
    assert _diff(ours, theirs) == 0


def _mismatch_fraction(a, b):
    return float(np.any(a != b, axis=-1).mean())


@pytest.mark.parametrize("kwargs", [
    dict(angle=0.0, translate=[7, -4], scale=1.0, shear=[0.0, 0.0]),
    dict(angle=0.0, translate=[0, 0], scale=1.0, shear=[16.7, 0.0], center=[0, 0]),
    dict(angle=0.0, translate=[0, 0], scale=1.0, shear=[0.0, -25.0], center=[0, 0]),
    dict(angle=23.0, translate=[3, 2], scale=1.2, shear=[5.0, 3.0]),
    dict(angle=-40.0, translate=[0, 0], scale=0.8, shear=[0.0, 0.0]),
])
@pytest.mark.parametrize("interp", ["nearest", "bilinear"])
@pytest.mark.parametrize("fill", [None, [10, 200, 30]])
def test_affine(kwargs, interp, fill):
    mode = InterpolationMode.NEAREST if interp == "nearest" else InterpolationMode.BILINEAR
    ours = fn.affine(IMG_BIG, interpolation=interp, fill=fill, **kwargs)
    theirs = _np(F.affine(_t(IMG_BIG), interpolation=mode, fill=fill, **kwargs))
    if interp == "nearest":
        assert _mismatch_fraction(ours, theirs) <= 0.01
        if kwargs["angle"] == 0 and kwargs["shear"] == [0.0, 0.0]:
            assert _diff(ours, theirs) == 0  # an integer shift is exact
    else:
        assert _diff(ours, theirs) <= 1


@pytest.mark.parametrize("angle", [9.0, -30.0, 90.0, 135.0])
def test_rotate(angle):
    ours = fn.rotate(IMG_BIG, angle)
    theirs = _np(F.rotate(_t(IMG_BIG), angle, interpolation=InterpolationMode.NEAREST))
    assert _mismatch_fraction(ours, theirs) <= 0.01
    ours = fn.rotate(IMG_BIG, angle, interpolation="bilinear", fill=[255, 0, 0])
    theirs = _np(F.rotate(_t(IMG_BIG), angle, interpolation=InterpolationMode.BILINEAR,
                          fill=[255, 0, 0]))
    assert _diff(ours, theirs) <= 1


_AA = T.AutoAugment()
_RA = T.RandAugment()
_TA = T.TrivialAugmentWide()


def _tv_apply(name, magnitude):
    return _np(_AA._apply_image_or_video_transform(_t(IMG_BIG), name, magnitude,
                                                   interpolation=_AA.interpolation,
                                                   fill=_AA._fill))


OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
       "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
       "Invert"]


@pytest.mark.parametrize("name", OPS)
def test_each_policy_op_matches_torchvision(name):
    for magnitude in [0.0, 0.3, -0.27, 0.5]:
        if name == "Posterize":
            magnitude = {0.0: 8, 0.3: 6, -0.27: 4, 0.5: 2}[magnitude]
        elif name in ("TranslateX", "TranslateY"):
            magnitude *= 40
        elif name == "Rotate":
            magnitude *= 60
        elif name == "Solarize":
            magnitude = abs(magnitude)
        ours = fn.apply_augment_op(IMG_BIG, name, magnitude)
        theirs = _tv_apply(name, magnitude)
        if name in ("ShearX", "ShearY", "Rotate"):
            assert _mismatch_fraction(ours, theirs) <= 0.01, (name, magnitude)
        elif name == "Contrast":
            assert _diff(ours, theirs) <= 1, (name, magnitude)
        else:
            assert _diff(ours, theirs) == 0, (name, magnitude)


def _close(a, b):
    # torch.linspace's vectorised path rounds some float32 entries one ulp apart from its
    # scalar path (lane-wise arange): magnitudes agree to float32 rounding.
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def _space(transform, name, bins, h, w):
    fn_, signed = transform._AUGMENTATION_SPACE[name]
    mags = fn_(bins, h, w)
    return (None if mags is None else [float(m) for m in mags]), signed


def test_rand_augment_draws_from_torchvision_space():
    h, w = IMG_BIG.shape[:2]
    names = set()
    for seed in range(200):
        ops = fn.sample_policy("rand_augment", w, h, seed=seed)
        assert len(ops) == 2
        for name, m in ops:
            names.add(name)
            mags, signed = _space(_RA, name, 31, h, w)
            if mags is None:
                assert m == 0
            else:
                assert _close(abs(m), mags[9]) and (signed or m >= 0), (name, m)
    assert names == set(_RA._AUGMENTATION_SPACE)


def test_trivial_augment_draws_from_torchvision_space():
    h, w = IMG_BIG.shape[:2]
    names = set()
    for seed in range(300):
        (name, m), = fn.sample_policy("trivial_augment_wide", w, h, seed=seed)
        names.add(name)
        mags, signed = _space(_TA, name, 31, h, w)
        if mags is None:
            assert m == 0
        else:
            assert any(_close(abs(m), x) for x in mags) and (signed or m >= 0), (name, m)
    assert names == set(_TA._AUGMENTATION_SPACE)


def test_auto_augment_draws_imagenet_subpolicies():
    h, w = IMG_BIG.shape[:2]
    for seed in range(300):
        ops = fn.sample_policy("auto_augment", w, h, seed=seed)
        assert len(ops) <= 2
        # Some sub-policy of torchvision's ImageNet list yields exactly these ops.
        ok = False
        for policy in _AA._policies:
            for keep in ([0, 1], [0], [1], []):
                chosen = [policy[k] for k in keep]
                if [c[0] for c in chosen] != [o[0] for o in ops]:
                    continue
                good = True
                for (name, _, idx), (_, m) in zip(chosen, ops):
                    mags, _signed = _space(_AA, name, 10, h, w)
                    good &= (m == 0) if mags is None else _close(abs(m), mags[idx])
                ok |= good
        assert ok, ops


@pytest.mark.parametrize("policy", ["auto_augment", "rand_augment", "trivial_augment_wide"])
def test_policy_is_its_sampled_ops_and_deterministic(policy):
    h, w = IMG_BIG.shape[:2]
    run = {"auto_augment": fn.auto_augment, "rand_augment": fn.rand_augment,
           "trivial_augment_wide": fn.trivial_augment_wide}[policy]
    outputs = set()
    for seed in range(16):
        out = run(IMG_BIG, seed=seed)
        assert np.array_equal(out, run(IMG_BIG, seed=seed))
        replay = IMG_BIG
        for name, m in fn.sample_policy(policy, w, h, seed=seed):
            replay = fn.apply_augment_op(replay, name, m)
            if seed < 6:  # the op alone also matches torchvision's
                theirs = _tv_apply(name, m)
                assert _mismatch_fraction(fn.apply_augment_op(IMG_BIG, name, m), theirs) <= 0.01
        assert np.array_equal(out, replay)
        outputs.add(out.tobytes())
    assert len(outputs) > 4  # the seed matters


def test_color_jitter():
    for f in [0.5, 1.4]:
        out = fn.color_jitter(IMG, brightness=(f, f), seed=3)
        assert _diff(out, _np(F.adjust_brightness(_t(IMG), f))) == 0
        out = fn.color_jitter(IMG, saturation=(f, f), seed=3)
        assert _diff(out, _np(F.adjust_saturation(_t(IMG), f))) == 0
    out = fn.color_jitter(IMG, hue=(0.2, 0.2), seed=3)
    assert _diff(out, _np(F.adjust_hue(_t(IMG), 0.2))) == 0
    a = fn.color_jitter(IMG, 0.4, 0.4, 0.4, 0.1, seed=7)
    assert np.array_equal(a, fn.color_jitter(IMG, 0.4, 0.4, 0.4, 0.1, seed=7))
    assert not np.array_equal(a, fn.color_jitter(IMG, 0.4, 0.4, 0.4, 0.1, seed=8))
    assert np.array_equal(fn.color_jitter(IMG, seed=1), IMG)  # all zero: identity
    with pytest.raises(ValueError):
        fn.color_jitter(IMG, hue=0.7, seed=0)


def test_random_grayscale_erasing_blur():
    gray = fn.random_grayscale(IMG, p=1.0, seed=0)
    assert _diff(gray, _np(F.rgb_to_grayscale(_t(IMG), 3))) == 0
    assert np.array_equal(fn.random_grayscale(IMG, p=0.0, seed=0), IMG)
    erased = 0
    for seed in range(40):
        out = fn.random_erasing(IMG_BIG, p=1.0, value=[0, 255, 0], seed=seed)
        changed = np.any(out != IMG_BIG, axis=-1)
        if changed.any():
            erased += 1
            ys, xs = np.nonzero(changed)
            box = out[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
            assert (box == [0, 255, 0]).all()  # one filled rectangle
            area = box.shape[0] * box.shape[1] / (IMG_BIG.shape[0] * IMG_BIG.shape[1])
            assert 0.015 <= area <= 0.34
    assert erased >= 35
    assert np.array_equal(fn.random_erasing(IMG_BIG, p=0.0, seed=1), IMG_BIG)
    b = fn.random_gaussian_blur(IMG, 5, (0.1, 2.0), seed=4)
    assert np.array_equal(b, fn.random_gaussian_blur(IMG, 5, (0.1, 2.0), seed=4))
    assert fn.gaussian_blur(IMG, 5, 1.0).shape == IMG.shape


def test_pointwise_ops_on_views_and_gray_leave_the_input():
    """invert / posterize / solarize write straight into a new array: the input (a strided
    view, a 2-D gray image) is left as it was and the output is a new array."""
    view = IMG[1::2, ::3]
    before = view.copy()
    for out, want in [(fn.invert(view), 255 - before),
                      (fn.posterize(view, 3), before & 0xE0),
                      (fn.solarize(view, 100), np.where(before >= 100, 255 - before, before))]:
        assert out.shape == before.shape and out.dtype == np.uint8
        assert _diff(out, want) == 0
        assert not np.shares_memory(out, IMG)
    assert _diff(view, before) == 0
    gray = IMG[:, :, 0].copy()
    assert fn.invert(gray).shape == gray.shape and _diff(fn.invert(gray), 255 - gray) == 0
    with pytest.raises(ValueError, match="threshold"):
        fn.solarize(IMG, 256)


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="hue_factor"):
        fn.adjust_hue(IMG, 0.6)
    with pytest.raises(ValueError, match="odd"):
        fn.gaussian_blur(IMG, 4, 1.0)
    with pytest.raises(ValueError, match="bits"):
        fn.posterize(IMG, 9)
    with pytest.raises(ValueError, match="unknown augmentation op"):
        fn.apply_augment_op(IMG, "Blur", 1.0)
    with pytest.raises(ValueError, match="channels"):
        fn.adjust_saturation(np.zeros((4, 4, 4), np.uint8), 0.5)


def _batch(dtype):
    rng = np.random.default_rng(3)
    b = rng.integers(0, 256, size=(5, 12, 10, 3))
    return b.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_mixup_matches_torchvision_formula(dtype):
    images = _batch(dtype)
    labels = np.array([0, 3, 1, 3, 2])
    lam = 0.3
    out, soft, used = fn.mixup(images, labels, 4, lam=lam)
    assert used == lam
    x = torch.from_numpy(images.astype(np.float32))
    want = x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam)).numpy()
    if dtype == np.uint8:
        assert np.abs(out.astype(np.float32) - want).max() <= 0.5 + 1e-3
    else:
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-4)
    mix = T.MixUp(num_classes=4)
    want_labels = mix._mixup_label(torch.from_numpy(labels), lam=lam).numpy()
    np.testing.assert_allclose(soft, want_labels, atol=1e-6)
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, atol=1e-6)
    _, _, drawn = fn.mixup(images, labels, 4, alpha=0.2, seed=9)
    assert 0.0 <= drawn <= 1.0
    assert fn.mixup(images, labels, 4, alpha=0.2, seed=9)[2] == drawn
    with pytest.raises(ValueError, match="label 7 of batch element 1"):
        fn.mixup(images, [0, 7, 1, 1, 1], 4, lam=0.5)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_cutmix_matches_torchvision_formula(dtype):
    images = _batch(dtype)
    labels = np.array([0, 3, 1, 3, 2])
    out, soft, lam, box = fn.cutmix(images, labels, 4, box=(2, 3, 5, 4))
    x1, y1, w, h = box
    x = torch.from_numpy(images)
    want = x.clone()
    want[:, y1:y1 + h, x1:x1 + w, :] = x.roll(1, 0)[:, y1:y1 + h, x1:x1 + w, :]
    assert np.array_equal(out, want.numpy())
    assert lam == pytest.approx(1 - (5 * 4) / (12 * 10))
    cut = T.CutMix(num_classes=4)
    want_labels = cut._mixup_label(torch.from_numpy(labels), lam=lam).numpy()
    np.testing.assert_allclose(soft, want_labels, atol=1e-6)
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, atol=1e-6)
    for seed in range(20):
        out, soft, lam, (bx, by, bw, bh) = fn.cutmix(images, labels, 4, seed=seed)
        assert 0 <= bx and bx + bw <= 10 and 0 <= by and by + bh <= 12
        assert lam == pytest.approx(1 - bw * bh / 120)
        np.testing.assert_allclose(soft.sum(axis=1), 1.0, atol=1e-6)
