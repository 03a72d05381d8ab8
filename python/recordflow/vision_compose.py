"""Composable native image ops (``rf.vision.Compose``), named and parameterised as
torchvision.transforms.v2 so that a recipe translates line by line::

    op = rf.vision.Compose([
        rf.vision.RandomResizedCrop(224, scale=(0.2, 1.0)),
        rf.vision.RandomHorizontalFlip(),
        rf.vision.ToDtype("float32", scale=True),
        rf.vision.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
    ], seed=0)
    ds = rf.Dataset.from_files(files).batch(256).map(op)

The whole chain runs in C++ on the pipeline's threads (no Python per image, no GIL), each
record with its own generator seeded by (seed, file, record index, epoch): reproducible, and
restored exactly from a checkpoint. See docs/image.md, "Composable ops", for the mapping and
the tolerances against torchvision.
"""

from __future__ import annotations

import numbers
import secrets
from collections.abc import Mapping, Sequence

from recordflow import _core
from recordflow.example import FixedLen, _specs

_INTERPOLATIONS = {"bilinear": "bilinear", "bicubic": "bicubic", "nearest": "nearest",
                   "nearest-exact": "nearest",
                   "nearest_exact": "nearest", "area": "area"}
_DTYPES = ("uint8", "float16", "bfloat16", "float32")


def _interpolation(value, what: str) -> str:
    name = getattr(value, "value", value)  # torchvision.transforms.InterpolationMode
    name = str(name).lower()
    if name not in _INTERPOLATIONS:
        raise ValueError(f"{what}: interpolation must be bilinear, bicubic, nearest, "
                         f"nearest-exact or area, got {value!r}")
    return _INTERPOLATIONS[name]


def _size2(size, what: str) -> tuple[int, int]:
    """torchvision's size argument: an int (square) or (h, w)."""
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return int(size[0]), int(size[0])
    if isinstance(size, Sequence) and len(size) == 2:
        return int(size[0]), int(size[1])
    raise ValueError(f"{what}: size must be an int or a (height, width) pair, got {size!r}")


def _pair(v, what: str) -> tuple[float, float]:
    if not isinstance(v, Sequence) or len(v) != 2:
        raise ValueError(f"{what} must be a pair of numbers, got {v!r}")
    return float(v[0]), float(v[1])


def _fill(fill, what: str) -> tuple[int, int, int]:
    if fill is None:
        return (0, 0, 0)
    vals = [fill] * 3 if isinstance(fill, numbers.Number) else list(fill)
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3 or any(not (0 <= float(v) <= 255) for v in vals):
        raise ValueError(f"{what}: fill must be a number or 3 numbers in 0..255, got {fill!r}")
    return tuple(int(round(float(v))) for v in vals)


def _dtype_name(dtype) -> str:
    name = str(getattr(dtype, "name", dtype)).replace("torch.", "")
    if name not in _DTYPES:
        raise ValueError(f"ToDtype: dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
    return name


class _Op:
    """An op of a recipe: its torchvision name and parameters (compared and pickled by value)."""

    def _spec(self) -> tuple[str, dict]:
        """(torchvision name, parameters) for the native recipe; by default the parameters are
        the op's attributes (an op whose native parameters differ defines its own)."""
        return (type(self).__name__, dict(self.__dict__))

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({args})"


class RandomResizedCrop(_Op):
    """torchvision.transforms.v2.RandomResizedCrop: a crop of area fraction in ``scale`` and
    aspect ratio (log-uniform) in ``ratio`` resized to ``size``. First in a recipe it is fused
    with the decode (only the crop is decoded)."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), interpolation="bilinear",
                 antialias: bool = True):
        self.size = _size2(size, "RandomResizedCrop")
        self.scale = _pair(scale, "RandomResizedCrop: scale")
        self.ratio = _pair(ratio, "RandomResizedCrop: ratio")
        self.interpolation = _interpolation(interpolation, "RandomResizedCrop")
        self.antialias = bool(antialias)

    def _spec(self):
        return ("RandomResizedCrop", {"height": self.size[0], "width": self.size[1],
                                      "scale": self.scale, "ratio": self.ratio,
                                      "interpolation": self.interpolation,
                                      "antialias": self.antialias})


class Resize(_Op):
    """torchvision.transforms.v2.Resize: ``size`` an int (the shorter side; the longer
    int(size * long / short), capped by ``max_size``) or (h, w)."""

    def __init__(self, size, interpolation="bilinear", max_size: int | None = None,
                 antialias: bool = True):
        if isinstance(size, numbers.Integral) or (isinstance(size, Sequence) and len(size) == 1):
            self.size = int(size if isinstance(size, numbers.Integral) else size[0])
        else:
            self.size = _size2(size, "Resize")
        self.interpolation = _interpolation(interpolation, "Resize")
        self.max_size = None if max_size is None else int(max_size)
        self.antialias = bool(antialias)

    def _spec(self):
        shorter = self.size if isinstance(self.size, int) else 0
        h, w = (0, 0) if isinstance(self.size, int) else self.size
        return ("Resize", {"shorter": shorter, "height": h, "width": w, "max_size": self.max_size,
                           "interpolation": self.interpolation, "antialias": self.antialias})


class CenterCrop(_Op):
    """torchvision.transforms.v2.CenterCrop (zero-padded when the image is smaller)."""

    def __init__(self, size):
        self.size = _size2(size, "CenterCrop")

    def _spec(self):
        return ("CenterCrop", {"height": self.size[0], "width": self.size[1]})


class Pad(_Op):
    """torchvision.transforms.v2.Pad: ``padding`` int (all sides), (left/right, top/bottom) or
    (left, top, right, bottom); ``padding_mode`` constant, edge, reflect or symmetric."""

    def __init__(self, padding, fill=0, padding_mode: str = "constant"):
        p = [padding] if isinstance(padding, numbers.Integral) else list(padding)
        if len(p) == 1:
            p = p * 4
        elif len(p) == 2:
            p = [p[0], p[1], p[0], p[1]]
        if len(p) != 4:
            raise ValueError(f"Pad: padding must be an int or 1, 2 or 4 ints, got {padding!r}")
        self.padding = tuple(int(v) for v in p)
        self.fill = _fill(fill, "Pad")
        self.padding_mode = str(padding_mode)


class RandomHorizontalFlip(_Op):
    def __init__(self, p: float = 0.5):
        self.p = float(p)


class RandomVerticalFlip(_Op):
    def __init__(self, p: float = 0.5):
        self.p = float(p)


class RandomRotation(_Op):
    """torchvision.transforms.v2.RandomRotation: angle uniform in ``degrees`` (a number d means
    (-d, d)), counter-clockwise about ``center`` ((x, y) in pixels from the top-left corner;
    None: the image center). With ``expand`` the output holds the whole rotated image, sized
    and placed as torchvision's (the center's shift included)."""

    def __init__(self, degrees, interpolation="nearest", expand: bool = False, center=None,
                 fill=0):
        if isinstance(degrees, numbers.Number):
            if degrees < 0:
                raise ValueError("RandomRotation: degrees must be non-negative when a number")
            degrees = (-float(degrees), float(degrees))
        self.degrees = _pair(degrees, "RandomRotation: degrees")
        self.center = None if center is None else _pair(center, "RandomRotation: center")
        self.interpolation = _policy_interpolation(interpolation, "RandomRotation")
        self.expand = bool(expand)
        self.fill = _fill(fill, "RandomRotation")


class Rotate90(_Op):
    """``k`` quarter turns counter-clockwise (torch.rot90(img, k, dims=(-2, -1)); exact)."""

    def __init__(self, k: int = 1):
        self.k = int(k)


class ToDtype(_Op):
    """torchvision.transforms.v2.ToDtype(dtype, scale=False): uint8, float16, bfloat16 or
    float32 (a torch / NumPy dtype or its name); ``scale``: floats in [0, 1]."""

    def __init__(self, dtype, scale: bool = False):
        if isinstance(dtype, Mapping):
            raise ValueError("ToDtype: a dtype per input type is not supported; give one dtype")
        self.dtype = _dtype_name(dtype)
        self.scale = bool(scale)


class Normalize(_Op):
    """torchvision.transforms.v2.Normalize(mean, std) on the float image."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False):
        if len(mean) != 3 or len(std) != 3:
            raise ValueError("Normalize: mean and std need 3 values (RGB)")
        self.mean = tuple(float(v) for v in mean)
        self.std = tuple(float(v) for v in std)


def _jitter_range(value, name: str, center: float, bound=None):
    """torchvision ColorJitter's argument: a number v -> [center - v, center + v] (clamped at
    0 for factors), a pair as is, None / 0 -> not applied."""
    if value is None:
        return None
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(f"ColorJitter: {name} must be non-negative, got {value!r}")
        if value == 0:
            return None
        lo, hi = center - float(value), center + float(value)
        if bound is None:
            lo = max(lo, 0.0)
        return (lo, hi)
    lo, hi = _pair(value, f"ColorJitter: {name}")
    return (lo, hi)


class ColorJitter(_Op):
    """torchvision.transforms.v2.ColorJitter (the four adjustments in a random order)."""

    def __init__(self, brightness=None, contrast=None, saturation=None, hue=None):
        self.brightness = _jitter_range(brightness, "brightness", 1.0)
        self.contrast = _jitter_range(contrast, "contrast", 1.0)
        self.saturation = _jitter_range(saturation, "saturation", 1.0)
        self.hue = _jitter_range(hue, "hue", 0.0, bound=0.5)


class RandomGrayscale(_Op):
    def __init__(self, p: float = 0.1):
        self.p = float(p)


class Grayscale(_Op):
    """torchvision.transforms.v2.Grayscale; the output keeps 3 channels (the tensor is RGB)."""

    def __init__(self, num_output_channels: int = 3):
        if num_output_channels != 3:
            raise ValueError("Grayscale: only num_output_channels=3 (the output tensor is RGB)")
        self.num_output_channels = 3

    def _spec(self):
        return ("Grayscale", {})


class GaussianBlur(_Op):
    """torchvision.transforms.v2.GaussianBlur(kernel_size, sigma=(0.1, 2.0))."""

    def __init__(self, kernel_size, sigma=(0.1, 2.0)):
        k = [kernel_size] * 2 if isinstance(kernel_size, numbers.Integral) else list(kernel_size)
        if len(k) != 2:
            raise ValueError(f"GaussianBlur: kernel_size must be an int or 2 ints, got {kernel_size!r}")
        self.kernel_size = (int(k[0]), int(k[1]))
        s = (float(sigma), float(sigma)) if isinstance(sigma, numbers.Number) else _pair(sigma, "GaussianBlur: sigma")
        self.sigma = s


class RandomErasing(_Op):
    """torchvision.transforms.v2.RandomErasing on the 8-bit image: place it before ToDtype;
    ``value`` is in pixel units (0..255), one number or one per channel, or ``"random"``:
    per-sample N(0, 1) in the normalized domain of the Normalize that must follow (each sample
    is round(255 * (mean + std * z)), clamped to 0..255, so after Normalize it is z up to the
    8-bit quantization and the clamp), deterministic per record and seed."""

    def __init__(self, p: float = 0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0,
                 inplace: bool = False):
        if isinstance(value, str):
            if value != "random":
                raise ValueError(f"RandomErasing: value must be numbers or 'random', got {value!r}")
            self.value = "random"
        else:
            self.value = ((float(value),) if isinstance(value, numbers.Number)
                          else tuple(float(v) for v in value))
        self.p = float(p)
        self.scale = _pair(scale, "RandomErasing: scale")
        self.ratio = _pair(ratio, "RandomErasing: ratio")

    def _spec(self):
        value = self.value if isinstance(self.value, str) else list(self.value)
        return ("RandomErasing", {"p": self.p, "scale": self.scale, "ratio": self.ratio,
                                  "value": value})


def _probability(p, what: str) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{what}: p must be in [0, 1], got {p!r}")
    return p


class _RandomApply(_Op):
    """An op torchvision applies with probability p (one draw per image); its parameters are
    its attributes, p included."""


class _OnlyP(_RandomApply):
    def __init__(self, p: float = 0.5):
        self.p = _probability(p, type(self).__name__)


class RandomInvert(_OnlyP):
    """torchvision.transforms.v2.RandomInvert(p=0.5)."""


class RandomAutocontrast(_OnlyP):
    """torchvision.transforms.v2.RandomAutocontrast(p=0.5)."""


class RandomEqualize(_OnlyP):
    """torchvision.transforms.v2.RandomEqualize(p=0.5)."""


class RandomPosterize(_RandomApply):
    """torchvision.transforms.v2.RandomPosterize(bits, p=0.5): keeps the high ``bits`` bits."""

    def __init__(self, bits: int, p: float = 0.5):
        self.bits = int(bits)
        self.p = _probability(p, "RandomPosterize")


class RandomSolarize(_RandomApply):
    """torchvision.transforms.v2.RandomSolarize(threshold, p=0.5): pixels >= threshold
    inverted (threshold in pixel units, 0..255)."""

    def __init__(self, threshold: float, p: float = 0.5):
        self.threshold = float(threshold)
        self.p = _probability(p, "RandomSolarize")


class RandomAdjustSharpness(_RandomApply):
    """torchvision.transforms.v2.RandomAdjustSharpness(sharpness_factor, p=0.5)."""

    def __init__(self, sharpness_factor: float, p: float = 0.5):
        self.sharpness_factor = float(sharpness_factor)
        self.p = _probability(p, "RandomAdjustSharpness")


def _symmetric(v, what: str, sizes=(2,)) -> tuple[float, ...]:
    """torchvision's _setup_angle: a number d means (-d, d); else 2 (or 4) numbers."""
    if isinstance(v, numbers.Number):
        if v < 0:
            raise ValueError(f"{what}: must be non-negative when a number")
        return (-float(v), float(v))
    if not isinstance(v, Sequence) or len(v) not in sizes:
        raise ValueError(f"{what}: must be a number or a sequence of {' or '.join(map(str, sizes))}"
                         f" numbers, got {v!r}")
    return tuple(float(x) for x in v)


class RandomAffine(_Op):
    """torchvision.transforms.v2.RandomAffine(degrees, translate=None, scale=None, shear=None,
    interpolation="nearest", fill=0, center=None): angle uniform in ``degrees`` (a number d
    means (-d, d)); translation up to ``translate`` = (fx, fy) of the width / height, rounded
    to whole pixels; scale uniform in ``scale``; shear x uniform in shear[0:2] (a number s
    means (-s, s)) and y in shear[2:4] when four values are given. The output keeps the input's
    size; boxes take the box around their transformed corners (clipped)."""

    def __init__(self, degrees, translate=None, scale=None, shear=None, interpolation="nearest",
                 fill=0, center=None):
        self.degrees = _symmetric(degrees, "RandomAffine: degrees")
        self.translate = None if translate is None else _pair(translate,
                                                              "RandomAffine: translate")
        self.scale = None if scale is None else _pair(scale, "RandomAffine: scale")
        shear4 = (0.0, 0.0, 0.0, 0.0)
        if shear is not None:
            sh = _symmetric(shear, "RandomAffine: shear", sizes=(2, 4))
            shear4 = sh + (0.0, 0.0) if len(sh) == 2 else sh
        self.shear = shear4
        self.interpolation = _policy_interpolation(interpolation, "RandomAffine")
        self.fill = _policy_fill(fill)
        self.center = None if center is None else _pair(center, "RandomAffine: center")


def _policy_fill(fill):
    if fill is None:
        return []
    return [float(fill)] if isinstance(fill, numbers.Number) else [float(v) for v in fill]


def _policy_interpolation(value, what):
    name = _interpolation(value, what)
    if name not in ("nearest", "bilinear"):
        raise ValueError(f"{what}: interpolation must be nearest or bilinear")
    return name


class AutoAugment(_Op):
    """torchvision.transforms.v2.AutoAugment with the ImageNet policy."""

    def __init__(self, policy="imagenet", interpolation="nearest", fill=None):
        pname = str(getattr(policy, "value", policy)).lower()
        if pname != "imagenet":
            raise ValueError(f"AutoAugment: only the ImageNet policy is supported, got {policy!r}")
        self.interpolation = _policy_interpolation(interpolation, "AutoAugment")
        self.fill = _policy_fill(fill)


class RandAugment(_Op):
    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation="nearest", fill=None):
        self.num_ops = int(num_ops)
        self.magnitude = int(magnitude)
        self.num_magnitude_bins = int(num_magnitude_bins)
        self.interpolation = _policy_interpolation(interpolation, "RandAugment")
        self.fill = _policy_fill(fill)


class TrivialAugmentWide(_Op):
    def __init__(self, num_magnitude_bins: int = 31, interpolation="nearest", fill=None):
        self.num_magnitude_bins = int(num_magnitude_bins)
        self.interpolation = _policy_interpolation(interpolation, "TrivialAugmentWide")
        self.fill = _policy_fill(fill)


class MixUp(_Op):
    """torchvision.transforms.v2.MixUp(alpha=1.0, num_classes): last in a Compose; mixes each
    batch the op makes (sample i with i - 1); the label becomes float32 [B, num_classes]."""

    def __init__(self, *, alpha: float = 1.0, num_classes: int | None = None, labels_getter="default"):
        if num_classes is None:
            raise ValueError("MixUp: num_classes is required")
        self.alpha = float(alpha)
        self.num_classes = int(num_classes)

    def _spec(self):
        raise TypeError("MixUp is a batch op")


class CutMix(MixUp):
    """torchvision.transforms.v2.CutMix(alpha=1.0, num_classes): as MixUp, pasting a box."""


_OPS = (RandomResizedCrop, Resize, CenterCrop, Pad, RandomHorizontalFlip, RandomVerticalFlip,
        RandomRotation, Rotate90, ToDtype, Normalize, ColorJitter, RandomGrayscale, Grayscale,
        GaussianBlur, RandomErasing, RandomInvert, RandomPosterize, RandomSolarize,
        RandomAdjustSharpness, RandomAutocontrast, RandomEqualize, RandomAffine, AutoAugment,
        RandAugment, TrivialAugmentWide)


def Compose(transforms: Sequence[_Op], *, image_key: str = "image/encoded",
            label_key: str | None = "image/class/label", label_mode: str = "int",
            num_classes: int | None = None, default_label: int | None = None,
            extra_keys: Mapping[str, object] | None = None, boxes_key: str | None = None,
            boxes_format: str = "normalized", layout: str = "CHW", seed: int | None = None,
            dct_scaling: bool = True, max_pixels: int = 1 << 28,
            on_corruption: str = "raise"):
    """A recipe of rf.vision ops as ONE native map op for :meth:`rf.Dataset.map`.

    Yields ``{"image": [B, 3, H, W] (layout="CHW", torchvision's) or [B, H, W, 3], "label":
    ...}`` plus ``extra_keys`` (a mapping key -> rf.FixedLen / rf.VarLen; passed through) and,
    with ``boxes_key`` (a float feature of x0, y0, x1, y1 per box, ``boxes_format``
    "normalized" or "pixel"), ``"boxes"`` (rf.Ragged, transformed with the image, clipped) and
    ``"boxes_mask"`` (rf.Ragged int64, 0 where clipping left a box empty; boxes are never
    dropped, so per-box labels stay aligned). ``label_mode``: "int" (one int64 per record),
    "multi_hot" (float32 [B, num_classes]), "padded" (int64 [B, num_classes], -1 after the
    labels) or label_key=None for none. Without ToDtype the image is uint8.
    ``seed``: None draws one (kept when pickled)."""
    ops = list(transforms)
    for i, t in enumerate(ops):
        if not isinstance(t, _Op):
            raise TypeError(f"Compose: transform #{i} {t!r} is not an rf.vision op (a Python "
                            "callable needs Dataset.map with a Python function)")
    mix = None
    if ops and isinstance(ops[-1], MixUp):
        mix = ops.pop()
    for t in ops:
        if isinstance(t, MixUp):
            raise ValueError(f"Compose: {type(t).__name__} is a batch op and must come last")
    if label_key is None:
        label_mode = "none"
    elif label_mode not in ("int", "multi_hot", "padded"):
        raise ValueError(f"label_mode must be int, multi_hot or padded, got {label_mode!r}")
    if label_mode in ("multi_hot", "padded") and not num_classes:
        raise ValueError(f"label_mode={label_mode!r} needs num_classes")
    if boxes_format not in ("normalized", "pixel"):
        raise ValueError(f"boxes_format must be normalized or pixel, got {boxes_format!r}")
    if str(layout).upper() not in ("HWC", "CHW"):
        raise ValueError(f"layout must be HWC or CHW, got {layout!r}")
    if seed is None:  # drawn here so that a pickled copy (a spawned worker) keeps it
        seed = secrets.randbits(63)
    params = dict(transforms=list(transforms), image_key=image_key, label_key=label_key,
                  label_mode=label_mode if label_key is not None else "int",
                  num_classes=num_classes, default_label=default_label,
                  extra_keys=None if extra_keys is None else dict(extra_keys),
                  boxes_key=boxes_key, boxes_format=boxes_format, layout=layout, seed=seed,
                  dct_scaling=dct_scaling, max_pixels=max_pixels, on_corruption=on_corruption)
    description = "Compose([" + ", ".join(repr(t) for t in transforms) + "])"
    core, h, w = _core.compose([t._spec() for t in ops], str(image_key), str(label_key or ""),
                               label_mode, int(num_classes or 0), default_label,
                               _specs(extra_keys, "extra_keys"), str(boxes_key or ""),
                               boxes_format == "normalized", str(layout).upper(), int(seed),
                               bool(dct_scaling), int(max_pixels), str(on_corruption),
                               "compose", "" if mix is None else type(mix).__name__,
                               1.0 if mix is None else mix.alpha,
                               0 if mix is None else mix.num_classes)
    from recordflow.vision import NativeOp
    dtype = "uint8"
    for t in ops:
        if isinstance(t, ToDtype):
            dtype = t.dtype
    outputs = None
    simple_extras = all(isinstance(s, FixedLen) and not s.shape and s.dtype in ("int64", "float32")
                        for s in (extra_keys or {}).values())
    if dtype in ("float32", "float16", "uint8") and not boxes_key and simple_extras:
        image = (3, h, w) if str(layout).upper() == "CHW" else (h, w, 3)
        outputs = {"image": (image, dtype)}
        if mix is not None:
            outputs["label"] = ((mix.num_classes,), "float32")
        elif label_mode == "int":
            outputs["label"] = ((), "int64")
        elif label_mode == "multi_hot":
            outputs["label"] = ((int(num_classes),), "float32")
        elif label_mode == "padded":
            outputs["label"] = ((int(num_classes),), "int64")
        for k, s in (extra_keys or {}).items():
            outputs[k] = ((), s.dtype)
    return NativeOp(core, description, "Compose", params, outputs=outputs)
