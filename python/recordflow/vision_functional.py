"""rf.vision.functional: torchvision.transforms.v2's photometric ops, affine ops, augmentation
policies and MixUp / CutMix, run natively (no Python per pixel, GIL released).

Images are HxWxC (or HxW) uint8 NumPy arrays; names, parameters and defaults follow
``torchvision.transforms.v2.functional`` (deterministic ops) and the v2 transform classes
(random ops, here functions taking ``seed``: the same seed gives the same output on every
platform; the draws follow torchvision's sampling but come from recordflow's generator, not
torch's). Outputs agree with torchvision's tensor kernels on uint8 images: most exactly, some
within one grey level (docs/image.md, "Augmentation ops", lists which and why).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recordflow import _core

_aug = _core.augment

__all__ = [
    "adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue",
    "adjust_sharpness", "rgb_to_grayscale", "posterize", "solarize", "invert", "autocontrast",
    "equalize", "gaussian_blur", "erase", "affine", "rotate", "color_jitter", "random_grayscale",
    "random_gaussian_blur", "random_erasing", "apply_augment_op", "sample_policy",
    "auto_augment", "rand_augment", "trivial_augment_wide", "mixup", "cutmix",
]


def _u8(image) -> np.ndarray:
    a = np.ascontiguousarray(image)
    if a.dtype != np.uint8:
        raise TypeError(f"expected a uint8 image, got {a.dtype}")
    return a


def _pair(v, name: str):
    if isinstance(v, (int, float)):
        return (v, v)
    if len(v) != 2:
        raise ValueError(f"{name}: expected one number or two")
    return tuple(v)


def _fill(fill) -> list[float]:
    if fill is None:
        return []
    if isinstance(fill, (int, float)):
        return [float(fill)]
    return [float(v) for v in fill]


def _restore(out: np.ndarray, image) -> np.ndarray:
    """HxW in -> HxW out (the native side works on HxWxC)."""
    return out[:, :, 0] if np.ndim(image) == 2 and out.shape[2] == 1 else out


# ---- deterministic ops (torchvision.transforms.v2.functional) -------------------------------

def adjust_brightness(image, brightness_factor: float) -> np.ndarray:
    return _restore(_aug.adjust_brightness(_u8(image), float(brightness_factor)), image)


def adjust_contrast(image, contrast_factor: float) -> np.ndarray:
    return _restore(_aug.adjust_contrast(_u8(image), float(contrast_factor)), image)


def adjust_saturation(image, saturation_factor: float) -> np.ndarray:
    return _restore(_aug.adjust_saturation(_u8(image), float(saturation_factor)), image)


def adjust_hue(image, hue_factor: float) -> np.ndarray:
    return _restore(_aug.adjust_hue(_u8(image), float(hue_factor)), image)


def adjust_sharpness(image, sharpness_factor: float) -> np.ndarray:
    return _restore(_aug.adjust_sharpness(_u8(image), float(sharpness_factor)), image)


def rgb_to_grayscale(image, num_output_channels: int = 1) -> np.ndarray:
    return _aug.rgb_to_grayscale(_u8(image), int(num_output_channels))


def posterize(image, bits: int) -> np.ndarray:
    return _restore(_aug.posterize(_u8(image), int(bits)), image)


def solarize(image, threshold: float) -> np.ndarray:
    return _restore(_aug.solarize(_u8(image), float(threshold)), image)


def invert(image) -> np.ndarray:
    return _restore(_aug.invert(_u8(image)), image)


def autocontrast(image) -> np.ndarray:
    return _restore(_aug.autocontrast(_u8(image)), image)


def equalize(image) -> np.ndarray:
    return _restore(_aug.equalize(_u8(image)), image)


def gaussian_blur(image, kernel_size, sigma=None) -> np.ndarray:
    """kernel_size: odd int or (kx, ky); sigma: float or (sx, sy); None: torchvision's default
    0.3 * ((k - 1) * 0.5 - 1) + 0.8 per axis."""
    k = _pair(kernel_size, "kernel_size")
    if sigma is None:
        s = tuple(0.3 * ((kk - 1) * 0.5 - 1) + 0.8 for kk in k)
    else:
        s = _pair(sigma, "sigma")
    return _restore(_aug.gaussian_blur(_u8(image), tuple(map(int, k)), tuple(map(float, s))),
                    image)


def erase(image, i: int, j: int, h: int, w: int, v=0) -> np.ndarray:
    """The h x w rectangle at row i, column j set to v (one value or one per channel)."""
    return _restore(_aug.erase(_u8(image), (int(j), int(i), int(w), int(h)), _fill(v)), image)


def affine(image, angle: float, translate: Sequence[float], scale: float,
           shear: float | Sequence[float], interpolation: str = "nearest", fill=None,
           center: Sequence[float] | None = None) -> np.ndarray:
    """interpolation: "nearest" or "bilinear"; fill None: zero padding (torchvision's None)."""
    sh = (float(shear), 0.0) if isinstance(shear, (int, float)) else tuple(map(float, shear))
    c = None if center is None else tuple(map(float, center))
    return _restore(_aug.affine(_u8(image), float(angle), tuple(map(float, translate)),
                                float(scale), sh, interpolation, _fill(fill), c), image)


def rotate(image, angle: float, interpolation: str = "nearest", fill=None) -> np.ndarray:
    """Counter-clockwise by ``angle`` degrees about the center, same size (expand=False)."""
    return _restore(_aug.rotate(_u8(image), float(angle), interpolation, _fill(fill)), image)


# ---- random transforms (torchvision.transforms.v2 classes) -----------------------------------

def _range(v, name: str, center: float = 1.0, bound: tuple[float, float] = (0.0, float("inf"))):
    """torchvision's ColorJitter._check_input: v -> [center - v, center + v] clipped, a pair as
    given; 0 (or (center, center)) -> None."""
    if isinstance(v, (int, float)):
        if v < 0:
            raise ValueError(f"{name}: must be non-negative, got {v}")
        lo, hi = center - v, center + v
        lo = max(lo, bound[0])
    else:
        lo, hi = map(float, v)
    if not (bound[0] <= lo <= hi <= bound[1]):
        raise ValueError(f"{name}: values should be between {bound}, got {(lo, hi)}")
    if lo == hi == center:
        return None
    return (float(lo), float(hi))


def color_jitter(image, brightness=0, contrast=0, saturation=0, hue=0, *,
                 seed: int) -> np.ndarray:
    """v2.ColorJitter: the four adjustments in a random order, each factor uniform in its
    range."""
    return _aug.color_jitter(_u8(image), _range(brightness, "brightness"),
                             _range(contrast, "contrast"), _range(saturation, "saturation"),
                             _range(hue, "hue", 0.0, (-0.5, 0.5)), int(seed))


def random_grayscale(image, p: float = 0.1, *, seed: int) -> np.ndarray:
    return _aug.random_grayscale(_u8(image), float(p), int(seed))


def random_gaussian_blur(image, kernel_size, sigma=(0.1, 2.0), *, seed: int) -> np.ndarray:
    """v2.GaussianBlur: sigma uniform in [sigma[0], sigma[1]] (both axes)."""
    k = _pair(kernel_size, "kernel_size")
    s = _pair(sigma, "sigma")
    return _aug.random_gaussian_blur(_u8(image), tuple(map(int, k)), tuple(map(float, s)),
                                     int(seed))


def random_erasing(image, p: float = 0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, *,
                   seed: int) -> np.ndarray:
    return _aug.random_erasing(_u8(image), float(p), tuple(map(float, scale)),
                               tuple(map(float, ratio)), _fill(value), int(seed))


def apply_augment_op(image, name: str, magnitude: float, interpolation: str = "nearest",
                     fill=None) -> np.ndarray:
    """One op of the policies' space ("ShearX", "Rotate", "Posterize", ...) at a signed
    magnitude, as torchvision's _apply_image_or_video_transform."""
    return _aug.apply_op(_u8(image), name, float(magnitude), interpolation, _fill(fill))


def sample_policy(policy: str, width: int, height: int, *, seed: int, num_ops: int = 2,
                  magnitude: int = 9, num_magnitude_bins: int = 31) -> list[tuple[str, float]]:
    """The (op, magnitude) list a policy ("auto_augment", "rand_augment",
    "trivial_augment_wide") draws for a width x height image with ``seed``."""
    return _aug.sample_policy(policy, int(width), int(height), int(seed), int(num_ops),
                              int(magnitude), int(num_magnitude_bins))


def auto_augment(image, *, seed: int, interpolation: str = "nearest", fill=None) -> np.ndarray:
    """v2.AutoAugment(AutoAugmentPolicy.IMAGENET)."""
    return _aug.policy(_u8(image), "auto_augment", int(seed), 0, 0, 10, interpolation,
                       _fill(fill))


def rand_augment(image, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31, *,
                 seed: int, interpolation: str = "nearest", fill=None) -> np.ndarray:
    return _aug.policy(_u8(image), "rand_augment", int(seed), int(num_ops), int(magnitude),
                       int(num_magnitude_bins), interpolation, _fill(fill))


def trivial_augment_wide(image, num_magnitude_bins: int = 31, *, seed: int,
                         interpolation: str = "nearest", fill=None) -> np.ndarray:
    return _aug.policy(_u8(image), "trivial_augment_wide", int(seed), 0, 0,
                       int(num_magnitude_bins), interpolation, _fill(fill))


# ---- batch ops ----------------------------------------------------------------------------------

def _labels(labels) -> np.ndarray:
    return np.ascontiguousarray(labels, dtype=np.int64).reshape(-1)


def mixup(images, labels, num_classes: int, alpha: float = 1.0, *, seed: int = 0,
          lam: float | None = None):
    """v2.MixUp on a [B, H, W, C] uint8 or float32 batch: (images, soft labels [B,
    num_classes] float32, lambda). Element i mixes with element i - 1; uint8 is rounded.
    ``lam``: use this lambda instead of drawing it from Beta(alpha, alpha)."""
    return _aug.mixup(np.ascontiguousarray(images), _labels(labels), int(num_classes),
                      float(alpha), None if lam is None else float(lam), int(seed))


def cutmix(images, labels, num_classes: int, alpha: float = 1.0, *, seed: int = 0, box=None):
    """v2.CutMix: (images, soft labels, lambda, (x, y, w, h)). ``box``: paste this (x, y, w, h)
    instead of drawing one; lambda is then 1 - box area / image area."""
    b = None if box is None else tuple(map(int, box))
    return _aug.cutmix(np.ascontiguousarray(images), _labels(labels), int(num_classes),
                       float(alpha), b, int(seed))
