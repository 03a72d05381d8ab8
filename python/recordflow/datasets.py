"""Demo data: an ImageNet-like image folder made from real photos that ship inside packages.

    python -m recordflow.datasets imagenet-like OUT_DIR [--classes 10] [--images-per-class 30]

An optional part of the package: `pip install 'recordflow[datasets]'` brings what it needs.
Sources, all found locally (nothing is downloaded): scikit-image's bundled sample photos
(``skimage/data``), scikit-learn's ``load_sample_images`` (china.jpg, flower.jpg) and the photos
in Debian's opencv-doc examples (``/usr/share/doc/opencv-doc/examples``; gzip'd files are read
too). Each class starts from one photo; each image is a random crop of it, rescaled so that its
shorter side is 300-500 px (ImageNet's spread), with sensor-like grain (the bundled photos are
small, so crops are upscaled and would otherwise be smoother than camera photos), saved as JPEG
at quality 75-95 with 4:2:0 (80%) or 4:4:4 (20%) chroma: about 85 KB per image (ImageNet's
average is about 110 KB). Same arguments and seed -> the same files.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import io
import os
import random
import sys

_OPENCV_DOC = "/usr/share/doc/opencv-doc/examples"
# Photos of natural scenes from the opencv-doc examples (the rest are drawings, charts, text).
_OPENCV_PHOTOS = [
    "data/baboon.jpg", "data/fruits.jpg", "data/aloeL.jpg", "data/leuvenA.jpg", "data/home.jpg",
    "data/lena.jpg", "data/building.jpg", "data/HappyFish.jpg", "data/butterfly.jpg",
    "data/squirrel_cls.jpg", "data/ela_original.jpg", "data/starry_night.jpg",
    "data/graf1.png", "data/pic2.png", "data/pic4.png", "data/LinuxLogo.jpg",
    "dnn_superres/butterfly.png", "alphamat/input_images/plant.jpg", "reg/home.png",
]
_SKIMAGE_PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
                   "rocket.jpg", "hubble_deep_field.jpg", "retina.jpg", "ihc.png"]


def _pil():
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError("recordflow.datasets (the demo data generator) needs Pillow, and finds "
                          "more photos with scikit-image and scikit-learn: "
                          "pip install 'recordflow[datasets]'") from e
    return Image


def source_photos(min_side: int = 256) -> list[tuple[str, object]]:
    """(name, PIL RGB image) of every usable photo found, in a fixed order."""
    Image = _pil()
    found: list[tuple[str, object]] = []

    def add(name, data_or_path):
        try:
            img = Image.open(data_or_path)
            img.load()
        except Exception:
            return
        if img.mode not in ("RGB", "RGBA", "P", "CMYK"):
            return
        img = img.convert("RGB")
        if min(img.size) >= min_side:
            found.append((name, img))

    try:
        import skimage
        base = os.path.join(os.path.dirname(skimage.__file__), "data")
        for f in _SKIMAGE_PHOTOS:
            if os.path.exists(os.path.join(base, f)):
                add("skimage/" + f, os.path.join(base, f))
    except ImportError:
        pass
    try:
        import sklearn.datasets
        base = os.path.join(os.path.dirname(sklearn.datasets.__file__), "images")
        for f in ("china.jpg", "flower.jpg"):
            if os.path.exists(os.path.join(base, f)):
                add("sklearn/" + f, os.path.join(base, f))
    except ImportError:
        pass
    for rel in _OPENCV_PHOTOS:
        path = os.path.join(_OPENCV_DOC, rel)
        if os.path.exists(path):
            add("opencv-doc/" + rel, path)
        elif os.path.exists(path + ".gz"):
            with gzip.open(path + ".gz", "rb") as f:
                add("opencv-doc/" + rel, io.BytesIO(f.read()))
    if not found:
        raise RuntimeError("no source photos found: install scikit-image, scikit-learn or "
                           "Debian's opencv-doc (scripts/setup.sh --test does)")
    return found


def _make_one(src, rng: random.Random, path: str, quality: tuple[int, int] = (75, 95)) -> int:
    Image = _pil()
    w, h = src.size
    # Random crop: 25-100% of the area, aspect 3/4..4/3, as ImageNet photos vary.
    for _ in range(10):
        area = w * h * rng.uniform(0.25, 1.0)
        aspect = rng.uniform(3 / 4, 4 / 3)
        cw, ch = int(round((area * aspect) ** 0.5)), int(round((area / aspect) ** 0.5))
        if cw <= w and ch <= h:
            break
    else:
        cw, ch = min(w, h), min(w, h)
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    crop = src.crop((x, y, x + cw, y + ch))
    shorter = rng.randint(300, 500)
    scale = shorter / min(cw, ch)
    size = (max(1, round(cw * scale)), max(1, round(ch * scale)))
    img = crop.resize(size, Image.BICUBIC)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    # The bundled photos are small (~512 px), so crops are upscaled and smoother than camera
    # photos; sensor-like grain restores the detail that makes real JPEGs ~110 KB at this size.
    import numpy as np
    noise = np.random.default_rng(rng.getrandbits(63)).normal(0, rng.uniform(10, 22),
                                                              (size[1], size[0], 1))
    pixels = np.asarray(img, dtype=np.float32) + noise
    img = Image.fromarray(np.clip(pixels + 0.5, 0, 255).astype(np.uint8))
    quality = rng.randint(*quality)
    subsampling = 0 if rng.random() < 0.2 else 2  # PIL: 0 = 4:4:4, 2 = 4:2:0
    img.save(path, "JPEG", quality=quality, subsampling=subsampling)
    return os.path.getsize(path)


def make_imagenet_like(out_dir: str, classes: int = 10, images_per_class: int = 100,
                       seed: int = 0, workers: int | None = None,
                       quality: tuple[int, int] = (75, 95)) -> dict:
    """Writes OUT_DIR/<synset-like class>/<class>_<n>.JPEG; returns {"classes", "images",
    "bytes", "sources"}. Deterministic for the same arguments. ``quality``: the range each
    image's JPEG quality is drawn from (higher: larger files; (85, 97) gives ~110 KB)."""
    photos = source_photos()
    os.makedirs(out_dir, exist_ok=True)
    names = [f"n{1440764 + 1117 * c:08d}" for c in range(classes)]
    jobs = []
    for c, name in enumerate(names):
        src_name, src = photos[c % len(photos)]
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        for i in range(images_per_class):
            rng = random.Random(f"{seed}/{c}/{i}")
            jobs.append((src, rng, os.path.join(out_dir, name, f"{name}_{i:05d}.JPEG")))
    with concurrent.futures.ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
        sizes = list(pool.map(lambda j: _make_one(*j, quality), jobs))
    return {"classes": names, "images": len(jobs), "bytes": sum(sizes),
            "sources": [n for n, _ in photos[:classes]]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m recordflow.datasets",
                                description="Generate demo datasets from bundled photos")
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("imagenet-like", help="ImageNet-like JPEG folder (one sub-folder per class)")
    q.add_argument("out_dir")
    q.add_argument("--classes", type=int, default=10)
    q.add_argument("--images-per-class", type=int, default=100)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--quality", type=int, nargs=2, default=(75, 95), metavar=("MIN", "MAX"),
                   help="JPEG quality range (default 75 95; 85 97 gives ~110 KB images)")
    args = p.parse_args(argv)
    info = make_imagenet_like(args.out_dir, args.classes, args.images_per_class, args.seed,
                              quality=tuple(args.quality))
    print(f"wrote {info['images']} JPEGs in {len(info['classes'])} classes to {args.out_dir} "
          f"({info['bytes'] / 1e6:.1f} MB, {info['bytes'] / max(1, info['images']) / 1e3:.0f} KB "
          f"per image)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
