"""rf.vision: native image ops and the ImageNet presets.

Presets are native ops for :meth:`rf.Dataset.map`: they run in C++ on the pipeline's threads
(no GIL), on single records or (better) on batches of serialized Examples, and yield
``{"image": array [B, size, size, 3], "label": int64 [B]}``::

    ds = (rf.Dataset.from_files("train-*.tfrecord", shuffle_files=True, seed=0)
            .shuffle(10_000, seed=0)
            .batch(256, drop_remainder=True)
            .map(rf.vision.imagenet_train(224, seed=0))
            .prefetch())

imagenet_train: fused JPEG decode of a RandomResizedCrop (torchvision's sampling; only the
crop's rows and iMCU columns are decoded, DCT-scaled by 1/2..1/8 when the crop shrinks that
much anyway) -> resize -> random horizontal flip -> normalize. imagenet_eval: resize the
shorter side to ``resize`` -> center crop ``size`` -> normalize (fused the same way).

``Compose([...])`` chains ops named as torchvision.transforms.v2 (RandomResizedCrop, Resize,
CenterCrop, Pad, RandomHorizontalFlip, RandomVerticalFlip, RandomRotation, Rotate90, ToDtype,
Normalize) into one native op; the presets are such recipes.

The single ops (decode_image, decode_region, resize, center_crop, flip_left_right, normalize,
random_resized_crop_params) take and return HWC uint8 NumPy arrays.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import numpy as np

from recordflow import _core

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class NativeOp:
    """A native map op (accepted by rf.Dataset.map). ``skipped_records``: images dropped under
    on_corruption="skip"."""

    def __init__(self, core_op, description: str, factory: str | None = None,
                 params: dict | None = None, outputs: dict | None = None):
        self._core = core_op
        self._outputs = outputs
        self._description = description
        # The preset function and its arguments: a NativeOp pickles as them and is rebuilt by
        # calling it again (DataLoader workers under spawn / forkserver).
        self._factory = factory
        self._params = dict(params) if params is not None else None

    def __reduce__(self):
        if self._factory is None:
            raise TypeError(f"cannot pickle {self!r}: it was not made by an rf.vision preset")
        return (_rebuild_native_op, (self._factory, self._params))

    def _drops_records(self) -> bool:
        """Whether it may drop records (on_corruption="skip"): the count after it is unknown."""
        return self._params is None or self._params.get("on_corruption", "raise") != "raise"

    @property
    def outputs(self) -> dict | None:
        """What the op yields per record, ``{key: (shape, NumPy dtype name)}`` (adapters such
        as rf.tf derive static signatures from it); None when unknown (bfloat16 arrives as
        ml_dtypes.bfloat16 or uint16 bits)."""
        p = self._params
        if self._factory == "Compose":
            return self._outputs
        if p is None or p.get("dtype", "float32") not in ("float32", "float16", "uint8"):
            return None
        size = int(p["size"])
        hwc = str(p.get("layout", "HWC")).upper() == "HWC"
        image = (size, size, 3) if hwc else (3, size, size)
        return {"image": (image, p.get("dtype", "float32")), "label": ((), "int64")}

    @property
    def drops_records(self) -> bool:
        """Batches after it may be smaller than the batch size (on_corruption="skip")."""
        return self._drops_records()

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def skipped_records(self) -> int:
        return self._core.skipped_records

    def __repr__(self) -> str:
        return f"rf.vision.{self._description}"


def imagenet_train(size: int = 224, image_key: str = "image/encoded",
                   label_key: str = "image/class/label", *, scale=(0.08, 1.0),
                   ratio=(3 / 4, 4 / 3), flip_probability: float = 0.5,
                   mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD,
                   dtype: str = "float32", layout: str = "HWC", interpolation: str = "bilinear",
                   seed: int | None = None, dct_scaling: bool = True, max_pixels: int = 1 << 28,
                   on_corruption: str = "raise", default_label: int | None = None) -> NativeOp:
    """Training preset. ``seed``: crops and flips are a function of (seed, file, record index,
    epoch), so a seeded pipeline is reproducible; None draws a random seed. ``dtype``: float32,
    float16, bfloat16 (delivered as uint16 bits, or ml_dtypes.bfloat16 when installed) or uint8
    (resized pixels, not normalized). ``layout``: "HWC" or "CHW"."""
    if seed is None:  # drawn here so that a pickled copy (a spawned worker) keeps it
        seed = secrets.randbits(63)
    op = _core.imagenet_train(int(size), image_key, label_key, tuple(map(float, scale)),
                              tuple(map(float, ratio)), float(flip_probability),
                              [float(v) for v in mean], [float(v) for v in std], str(dtype),
                              str(layout), str(interpolation), seed, bool(dct_scaling),
                              int(max_pixels), str(on_corruption), default_label)
    return NativeOp(op, f"imagenet_train({size})", "imagenet_train", _params(locals()))


def imagenet_eval(size: int = 224, resize: int = 256, image_key: str = "image/encoded",
                  label_key: str = "image/class/label", *, mean: Sequence[float] = IMAGENET_MEAN,
                  std: Sequence[float] = IMAGENET_STD, dtype: str = "float32", layout: str = "HWC",
                  interpolation: str = "bilinear", dct_scaling: bool = True,
                  max_pixels: int = 1 << 28, on_corruption: str = "raise",
                  default_label: int | None = None) -> NativeOp:
    """Evaluation preset: shorter side to ``resize`` (torchvision's Resize sizes), center crop
    ``size`` (torchvision's rounding), normalize."""
    op = _core.imagenet_eval(int(size), int(resize), image_key, label_key,
                             [float(v) for v in mean], [float(v) for v in std], str(dtype),
                             str(layout), str(interpolation), bool(dct_scaling), int(max_pixels),
                             str(on_corruption), default_label)
    return NativeOp(op, f"imagenet_eval({size}, {resize})", "imagenet_eval", _params(locals()))


def _params(scope: dict) -> dict:
    return {k: v for k, v in scope.items() if k != "op"}


def _rebuild_native_op(factory: str, params: dict) -> NativeOp:
    if factory == "Compose":
        return Compose(**params)
    if factory not in ("imagenet_train", "imagenet_eval"):
        raise ValueError(f"unknown rf.vision preset {factory!r}")
    return globals()[factory](**params)


def decode_image(data: bytes, max_pixels: int = 1 << 28, *, channels: int = 3,
                 dtype: str = "uint8", max_scans: int = 500) -> np.ndarray:
    """Any supported image (JPEG, PNG, BMP, GIF, WebP; dispatched on magic bytes) -> HxWxC array.

    ``channels``: 3 (RGB, the default), 0 (as stored, like TF's ``channels=0``: PNG gray+alpha
    gives 2, a palette PNG with transparency 4), 1 or 4. ``dtype``: ``"uint8"`` or ``"uint16"``
    (TF's ``dtype=tf.uint16``: a 16-bit PNG gives its samples, 8-bit sources value * 257).
    PNG samples come out as stored, exactly as ``tf.io.decode_png`` gives them: no gamma or
    colour-profile conversion (gAMA, cHRM, sRGB and iCCP chunks are ignored) and 16-bit samples
    become 8-bit by their high byte. ``max_pixels``: larger images (and GIF frames larger than
    that, or far larger than the GIF's screen) raise ``rf.ResourceExhaustedError``
    before decoding; ``max_scans``: a progressive JPEG with more scans is refused (CPU bound).
    """
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.uint8), np.dtype(np.uint16)):
        raise ValueError(f"dtype must be uint8 or uint16, got {dtype!r}")
    return _core.decode_image(bytes(data), int(max_pixels), int(channels),
                              dt == np.dtype(np.uint16), int(max_scans))


def decode_region(data: bytes, crop: tuple[int, int, int, int] | None = None,
                  target_size: tuple[int, int] | None = None, dct_scaling: bool = True,
                  fancy_upsampling: bool = True, max_pixels: int = 1 << 28,
                  max_scans: int = 500):
    """Decodes only ``crop`` = (x, y, width, height) of a JPEG, DCT-scaled when the crop is to be
    resized to ``target_size`` = (width, height) by 2x or more. Returns (pixels, box,
    scale_denom): ``box`` = (x, y, w, h) locates the crop in ``pixels`` (fractional when scaled).

    The window must lie inside the image with width and height > 0, as for TF's
    ``decode_and_crop_jpeg`` and ``crop_to_bounding_box``: otherwise ``rf.InvalidArgumentError``
    (a ValueError) naming the window and the image size; nothing is clipped. ``None``: the
    whole image. Only the presets clip, deliberately: imagenet_eval's filter margin around its
    center crop is cut at the image's edges."""
    tw, th = target_size if target_size is not None else (0, 0)
    return _core.decode_region(bytes(data), None if crop is None else tuple(int(v) for v in crop),
                               int(tw), int(th), bool(dct_scaling), bool(fancy_upsampling),
                               int(max_pixels), int(max_scans))


def _u8(image) -> np.ndarray:
    a = np.ascontiguousarray(image)
    if a.dtype != np.uint8:
        raise TypeError("expected a uint8 array")
    return a


def resize(image: np.ndarray, size: tuple[int, int], interpolation: str = "bilinear",
           box: tuple[float, float, float, float] | None = None) -> np.ndarray:
    """Resamples to ``size`` = (height, width): "bilinear" (antialiased when shrinking, as
    Pillow's BILINEAR and tf.image.resize(antialias=True)), "area" or "nearest". ``box`` =
    (x, y, w, h): the source region (fractional, like Pillow's resize box)."""
    h, w = size
    return _core.resize(_u8(image), int(w), int(h), interpolation,
                        None if box is None else tuple(float(v) for v in box))


def center_crop(image: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
    h, w = (size, size) if isinstance(size, int) else size
    return _core.center_crop(_u8(image), int(w), int(h))


def flip_left_right(image: np.ndarray) -> np.ndarray:
    return _core.flip_left_right(_u8(image))


def normalize(image: np.ndarray, mean: Sequence[float] = IMAGENET_MEAN,
              std: Sequence[float] = IMAGENET_STD, dtype: str = "float32", layout: str = "HWC",
              flip: bool = False) -> np.ndarray:
    """(pixel / 255 - mean) / std as float32, float16 or bfloat16 (uint8: the pixels)."""
    a = _u8(image)
    raw = _core.normalize(a, [float(v) for v in mean], [float(v) for v in std], dtype, layout,
                          bool(flip))
    h, w = a.shape[:2]
    shape = (h, w, 3) if layout.upper() == "HWC" else (3, h, w)
    return np.frombuffer(raw, dtype=_numpy_dtype(dtype)).reshape(shape)


def random_resized_crop_params(width: int, height: int, n: int = 1, seed: int = 0,
                               scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) -> np.ndarray:
    """``n`` crops (x, y, w, h) with torchvision's RandomResizedCrop.get_params semantics."""
    return _core.random_resized_crop_params(int(width), int(height), int(seed), int(n),
                                            tuple(map(float, scale)), tuple(map(float, ratio)))


def kernel_backend() -> str:
    """The SIMD backend of the pixel kernels in use: "avx2", "sse2" or "scalar"."""
    return _core.kernel_backend()


def set_kernel_backend(name: str) -> None:
    """Forces a kernel backend ("auto", "scalar", "sse2", "avx2"): for tests and benchmarks."""
    _core.set_kernel_backend(name)


def _numpy_dtype(dtype: str):
    if dtype == "bfloat16":
        try:
            import ml_dtypes
            return ml_dtypes.bfloat16
        except ImportError:
            return np.uint16
    return np.dtype(dtype)

from recordflow import vision_functional as functional  # noqa: E402, F401  (rf.vision.functional)

# The composable ops (rf.vision.Compose and its ops), defined in vision_compose.py.
from recordflow.vision_compose import (  # noqa: E402, F401
    AutoAugment,
    CenterCrop,
    ColorJitter,
    Compose,
    CutMix,
    GaussianBlur,
    Grayscale,
    MixUp,
    Normalize,
    Pad,
    RandAugment,
    RandomAdjustSharpness,
    RandomAffine,
    RandomAutocontrast,
    RandomEqualize,
    RandomErasing,
    RandomGrayscale,
    RandomHorizontalFlip,
    RandomInvert,
    RandomPosterize,
    RandomResizedCrop,
    RandomRotation,
    RandomSolarize,
    RandomVerticalFlip,
    Resize,
    Rotate90,
    ToDtype,
    TrivialAugmentWide,
)
