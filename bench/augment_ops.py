#!/usr/bin/env python3
"""Augmentation ops: cost per image of rf.vision.functional against torchvision.transforms.v2
(uint8 tensors and PIL images) and, where installed, DALI's CPU operators, on one core.

    taskset -c 0 python bench/augment_ops.py [--sizes 224x224,500x375] [--min-time 0.2]

Same image (a natural photo from scikit-image resized to the size, or a noisy gradient when
scikit-image is missing) and same parameters for every contender; torch runs with one thread.
Prints CPU microseconds per image (process time: a loaded machine's other work is not
counted) and the ratio peer / recordflow (> 1: recordflow is faster).

recordflow is timed two ways:
- "rf call": one rf.vision.functional call from Python per image, the NumPy copy in and the
  array out included;
- "rf map": the op as it runs in training, inside the native map of an rf.vision.Compose
  recipe (`Dataset.from_records(...).batch(64).map(Compose([CenterCrop(size)] + [op] * k))`,
  one engine thread, k = 8..64 so that the chain costs about what the rest of the pipeline
  does): the CPU time of that pipeline minus the same pipeline without the ops, per image and
  application (median of 5 alternated pairs; records hold the image as BMP, so the decode both
  pipelines share is a copy). The
  ratios are taken against "rf map", the cost a training run pays; "rf call" shows what a
  Python call adds.
torchvision's tensor time excludes the HWC -> CHW conversion (its ops take CHW tensors as they
come from a decoder); DALI's is per image of its batched pipeline.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import recordflow as rf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python" / "tests"))
from torchvision_compat import ensure_torchvision  # noqa: E402

fn = rf.vision.functional


def _import_tv():
    if not ensure_torchvision():
        return None, None
    import torchvision.transforms.v2 as T
    import torchvision.transforms.v2.functional as F
    return T, F


def make_image(w: int, h: int) -> np.ndarray:
    try:
        from PIL import Image
        from skimage import data
        return np.asarray(Image.fromarray(data.astronaut()).resize((w, h), Image.BILINEAR))
    except ImportError:
        rng = np.random.default_rng(0)
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (w + h)], -1)
        return np.clip(base + rng.integers(-30, 31, (h, w, 3)), 0, 255).astype(np.uint8)


def per_call(f, min_time: float) -> float:
    """CPU seconds per call (this process's CPU time, so that other load on a shared machine
    does not count): the best of 3 runs of at least min_time / 3 each."""
    f()
    best = float("inf")
    for _ in range(3):
        n, t0 = 0, time.process_time()
        while True:
            f()
            n += 1
            el = time.process_time() - t0
            if el >= min_time / 3:
                break
        best = min(best, el / n)
    return best


def ops(img, T, F, torch):
    """name -> (rf callable, torchvision functional callable on one input, DALI op or None)."""
    seeds = iter(range(1 << 30))
    cj = T.ColorJitter(0.4, 0.4, 0.4, 0.1) if T else None
    aa, ra, ta = (T.AutoAugment(), T.RandAugment(), T.TrivialAugmentWide()) if T else (None,) * 3
    er = T.RandomErasing(p=1.0) if T else None
    gb = T.GaussianBlur(5, (0.1, 2.0)) if T else None
    return {
        "adjust_brightness(1.3)": (lambda: fn.adjust_brightness(img, 1.3),
                                   lambda x: F.adjust_brightness(x, 1.3)),
        "adjust_contrast(1.3)": (lambda: fn.adjust_contrast(img, 1.3),
                                 lambda x: F.adjust_contrast(x, 1.3)),
        "adjust_saturation(1.3)": (lambda: fn.adjust_saturation(img, 1.3),
                                   lambda x: F.adjust_saturation(x, 1.3)),
        "adjust_hue(0.1)": (lambda: fn.adjust_hue(img, 0.1), lambda x: F.adjust_hue(x, 0.1)),
        "rgb_to_grayscale": (lambda: fn.rgb_to_grayscale(img, 3),
                             lambda x: F.rgb_to_grayscale(x, 3)),
        "gaussian_blur(5, 1.0)": (lambda: fn.gaussian_blur(img, 5, 1.0),
                                  lambda x: F.gaussian_blur(x, [5, 5], [1.0, 1.0])),
        "posterize(4)": (lambda: fn.posterize(img, 4), lambda x: F.posterize(x, 4)),
        "solarize(128)": (lambda: fn.solarize(img, 128), lambda x: F.solarize(x, 128)),
        "invert": (lambda: fn.invert(img), lambda x: F.invert(x)),
        "autocontrast": (lambda: fn.autocontrast(img), lambda x: F.autocontrast(x)),
        "equalize": (lambda: fn.equalize(img), lambda x: F.equalize(x)),
        "adjust_sharpness(1.5)": (lambda: fn.adjust_sharpness(img, 1.5),
                                  lambda x: F.adjust_sharpness(x, 1.5)),
        "rotate(15)": (lambda: fn.rotate(img, 15.0), lambda x: F.rotate(x, 15.0)),
        "affine shear(17)": (lambda: fn.affine(img, 0, [0, 0], 1.0, [17.0, 0.0]),
                             lambda x: F.affine(x, 0.0, [0, 0], 1.0, [17.0, 0.0])),
        "affine translate(20)": (lambda: fn.affine(img, 0, [20, 0], 1.0, [0.0, 0.0]),
                                 lambda x: F.affine(x, 0.0, [20, 0], 1.0, [0.0, 0.0])),
        "ColorJitter(.4,.4,.4,.1)": (lambda: fn.color_jitter(img, .4, .4, .4, .1,
                                                             seed=next(seeds)), cj),
        "GaussianBlur(5)": (lambda: fn.random_gaussian_blur(img, 5, seed=next(seeds)), gb),
        "RandomErasing(p=1)": (lambda: fn.random_erasing(img, 1.0, seed=next(seeds)), er),
        "AutoAugment": (lambda: fn.auto_augment(img, seed=next(seeds)), aa),
        "RandAugment": (lambda: fn.rand_augment(img, seed=next(seeds)), ra),
        "TrivialAugmentWide": (lambda: fn.trivial_augment_wide(img, seed=next(seeds)), ta),
    }


def map_ops(img):
    """name -> the rf.vision.Compose op that runs the same op in a native map."""
    V = rf.vision
    h, w = img.shape[:2]
    return {
        "adjust_brightness(1.3)": V.ColorJitter(brightness=(1.3, 1.3)),
        "adjust_contrast(1.3)": V.ColorJitter(contrast=(1.3, 1.3)),
        "adjust_saturation(1.3)": V.ColorJitter(saturation=(1.3, 1.3)),
        "adjust_hue(0.1)": V.ColorJitter(hue=(0.1, 0.1)),
        "rgb_to_grayscale": V.Grayscale(3),
        "gaussian_blur(5, 1.0)": V.GaussianBlur(5, sigma=(1.0, 1.0)),
        "posterize(4)": V.RandomPosterize(4, p=1.0),
        "solarize(128)": V.RandomSolarize(128, p=1.0),
        "invert": V.RandomInvert(p=1.0),
        "autocontrast": V.RandomAutocontrast(p=1.0),
        "equalize": V.RandomEqualize(p=1.0),
        "adjust_sharpness(1.5)": V.RandomAdjustSharpness(1.5, p=1.0),
        "rotate(15)": V.RandomRotation((15.0, 15.0)),
        "affine shear(17)": V.RandomAffine(0, shear=(17.0, 17.0)),
        # a shift drawn in [-20, 20] pixels: the same work as a fixed 20
        "affine translate(20)": V.RandomAffine(0, translate=(20.0 / w, 0.0)),
        "ColorJitter(.4,.4,.4,.1)": V.ColorJitter(.4, .4, .4, .1),
        "GaussianBlur(5)": V.GaussianBlur(5),
        "RandomErasing(p=1)": V.RandomErasing(p=1.0),
        "AutoAugment": V.AutoAugment(),
        "RandAugment": V.RandAugment(),
        "TrivialAugmentWide": V.TrivialAugmentWide(),
    }


def in_map_timer(img, n: int = 256, batch: int = 64, runs: int = 5):
    """A function (op, its call time) -> CPU seconds per image that `op` adds inside a native
    Compose map, on one engine thread. The op is chained in the recipe enough times (8 to 64)
    that the chain costs about what the pipeline itself does (parse, decode, crop, output), so
    that it stands out of that pipeline's noise: per image and application it is (CPU with the
    chain - CPU without) / (n * times), the median over `runs` alternated pairs of runs after a
    warm-up of each."""
    import io

    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "BMP")
    rec = rf.Example({"image/encoded": buf.getvalue(), "image/class/label": 0}).serialize()
    recs = [rec] * n
    h, w = img.shape[:2]
    crop = rf.vision.CenterCrop((h, w))

    def pipeline(ops):
        return rf.Dataset.from_records(recs).batch(batch).map(
            rf.vision.Compose([crop] + ops, layout="HWC", seed=0))

    def cpu(ds) -> float:
        t0 = time.process_time()
        for _ in ds.iterator(max_threads=1):
            pass
        return time.process_time() - t0

    base = pipeline([])
    cpu(base)
    base_per_image = min(cpu(base) for _ in range(3)) / n

    def per_image(op, call_seconds: float) -> float:
        times = int(min(64, max(8, base_per_image / max(call_seconds, 1e-7))))
        chained = pipeline([op] * times)
        cpu(chained)
        diffs = sorted(cpu(chained) - cpu(base) for _ in range(runs))
        return max(diffs[len(diffs) // 2], 0.0) / (n * times)

    return per_image


def dali_ops(img):
    """DALI CPU pipelines (one thread, batches of 32 of the image) for the ops DALI has, with
    the same parameters, or {} when nvidia.dali is not installed. Random ops draw per sample as
    rf's do; the policies are DALI's own nvidia.dali.auto_aug (ImageNet AutoAugment,
    RandAugment(n=2, m=9), TrivialAugmentWide)."""
    try:
        import nvidia.dali.types as dtypes
        from nvidia.dali import fn as dfn
        from nvidia.dali import pipeline_def
        from nvidia.dali.auto_aug import augmentations as aug
        from nvidia.dali.auto_aug import auto_augment, rand_augment, trivial_augment
    except ImportError:
        return {}
    batch = 32
    imgs = [img] * batch
    h, w = img.shape[:2]

    def make(op):
        @pipeline_def(batch_size=batch, num_threads=1, device_id=None, exec_async=False,
                      exec_pipelined=False, enable_conditionals=True, seed=0)
        def p():
            x = dfn.external_source(source=lambda: imgs, layout="HWC")
            return op(x)
        pipe = p()
        pipe.build()
        return lambda: pipe.run(), batch

    def warp(matrix):  # torchvision's affine: nearest, fill 0; matrix built in the pipeline
        return lambda x: dfn.warp_affine(x, matrix=matrix(), fill_value=0, inverse_map=False,
                                         interp_type=dtypes.INTERP_NN)

    center = [w / 2, h / 2]
    u8 = dtypes.UINT8
    uniform = dfn.random.uniform
    return {
        "adjust_brightness(1.3)": make(lambda x: dfn.brightness(x, brightness=1.3)),
        "adjust_contrast(1.3)": make(lambda x: dfn.contrast(x, contrast=1.3)),
        "adjust_saturation(1.3)": make(lambda x: dfn.saturation(x, saturation=1.3)),
        "adjust_hue(0.1)": make(lambda x: dfn.hue(x, hue=36.0)),
        "rgb_to_grayscale": make(lambda x: dfn.saturation(x, saturation=0.0)),
        "gaussian_blur(5, 1.0)": make(lambda x: dfn.gaussian_blur(x, window_size=5, sigma=1.0)),
        "posterize(4)": make(lambda x: x & dtypes.Constant(0xF0, dtype=u8)),
        # solarize's DALI magnitude runs 256 -> 0: bin 1 of 3 is threshold 128.
        "solarize(128)": make(lambda x: aug.solarize(x, magnitude_bin=1, num_magnitude_bins=3)),
        "invert": make(lambda x: aug.invert(x)),
        "autocontrast": make(lambda x: aug.auto_contrast(x)),
        "equalize": make(lambda x: dfn.equalize(x)),
        # sharpness: factor 1 + magnitude, magnitude 0..0.9 in 10 bins: bin 5 is 1.5.
        "adjust_sharpness(1.5)": make(lambda x: aug.sharpness(x, magnitude_bin=5,
                                                              num_magnitude_bins=10)),
        "rotate(15)": make(lambda x: dfn.rotate(x, angle=15.0, keep_size=True, fill_value=0,
                                                interp_type=dtypes.INTERP_NN)),
        "affine shear(17)": make(warp(lambda: dfn.transforms.shear(angles=[17.0, 0.0],
                                                                     center=center))),
        "affine translate(20)": make(warp(lambda: dfn.transforms.translation(
            offset=[20.0, 0.0]))),
        "ColorJitter(.4,.4,.4,.1)": make(lambda x: dfn.color_twist(
            x, brightness=uniform(range=[0.6, 1.4]), contrast=uniform(range=[0.6, 1.4]),
            saturation=uniform(range=[0.6, 1.4]), hue=uniform(range=[-36.0, 36.0]))),
        "GaussianBlur(5)": make(lambda x: dfn.gaussian_blur(x, window_size=5,
                                                            sigma=uniform(range=[0.1, 2.0]))),
        "RandomErasing(p=1)": make(lambda x: dfn.erase(x, anchor=(10, 10), shape=(50, 50),
                                                      axis_names="HW")),
        "AutoAugment": make(lambda x: auto_augment.auto_augment_image_net(x, shape=[h, w])),
        "RandAugment": make(lambda x: rand_augment.rand_augment(x, n=2, m=9, shape=[h, w])),
        "TrivialAugmentWide": make(lambda x: trivial_augment.trivial_augment_wide(
            x, shape=[h, w])),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="224x224,500x375")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--only", default="", help="comma-separated substrings of op names")
    args = ap.parse_args()
    T, F = _import_tv()
    torch = None
    if T is not None:
        import torch
        torch.set_num_threads(1)
        from PIL import Image
    print(f"recordflow {rf.__version__}; torch {torch.__version__ if torch else '-'}; "
          f"kernel backend {rf.vision.kernel_backend()}; one thread")
    only = [s for s in args.only.split(",") if s]
    for size in args.sizes.split(","):
        w, h = map(int, size.split("x"))
        img = make_image(w, h)
        tensor = torch.from_numpy(img.copy()).permute(2, 0, 1).contiguous() if torch else None
        pil = Image.fromarray(img) if torch else None
        dali = dali_ops(img)
        in_map = in_map_timer(img)
        native = map_ops(img)
        print(f"\n{w}x{h} (us per image; ratio = peer / rf map)")
        print(f"{'op':26s} {'rf call':>8s} {'rf map':>7s} {'tv tensor':>10s} {'ratio':>6s} "
              f"{'tv PIL':>9s} {'ratio':>6s} {'DALI cpu':>9s} {'ratio':>6s}")
        for name, (ours, theirs) in ops(img, T, F, torch).items():
            if only and not any(s in name for s in only):
                continue
            t_call = per_call(ours, args.min_time)
            t_rf = in_map(native[name], t_call)
            row = f"{name:26s} {t_call * 1e6:8.0f} {t_rf * 1e6:7.0f}"
            t_rf = max(t_rf, 1e-7)  # an op below the timer's resolution
            for inp in (tensor, pil):
                if theirs is None or inp is None:
                    row += f" {'-':>9s} {'-':>6s}"
                    continue
                try:
                    t = per_call(lambda: theirs(inp), args.min_time)
                    row += f" {t * 1e6:9.0f} {t / t_rf:6.1f}"
                except (TypeError, ValueError, NotImplementedError):
                    row += f" {'n/a':>9s} {'-':>6s}"
            if name in dali:
                run, batch = dali[name]
                t = per_call(run, args.min_time) / batch
                row += f" {t * 1e6:9.0f} {t / t_rf:6.1f}"
            else:
                row += f" {'-':>9s} {'-':>6s}"
            print(row, flush=True)
        if not dali:
            print("(DALI: nvidia.dali not installed here; pip install nvidia-dali-cuda120)")
        # Batch ops: per image of a batch of 32.
        batch = np.stack([img] * 32).astype(np.float32)
        labels = np.arange(32) % 10
        t_rf = per_call(lambda: fn.mixup(batch, labels, 10, lam=0.3), args.min_time) / 32
        t_cut = per_call(lambda: fn.cutmix(batch, labels, 10, seed=1), args.min_time) / 32
        line_m = f"{'MixUp (float32, B=32)':26s} {t_rf * 1e6:8.0f} {'-':>7s}"
        line_c = f"{'CutMix (float32, B=32)':26s} {t_cut * 1e6:8.0f} {'-':>7s}"
        if T is not None:
            tb = torch.from_numpy(batch).permute(0, 3, 1, 2).contiguous()
            tl = torch.from_numpy(labels)
            mix, cut = T.MixUp(num_classes=10), T.CutMix(num_classes=10)
            t = per_call(lambda: mix(tb, tl), args.min_time) / 32
            line_m += f" {t * 1e6:9.0f} {t / t_rf:6.1f}"
            t = per_call(lambda: cut(tb, tl), args.min_time) / 32
            line_c += f" {t * 1e6:9.0f} {t / t_cut:6.1f}"
        print(line_m)
        print(line_c)


if __name__ == "__main__":
    main()
