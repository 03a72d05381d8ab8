#!/usr/bin/env python3
"""Writes small PNGs and the pixels TensorFlow's tf.io.decode_png gives for them.

    python3 testdata/golden/make_png_golden.py [--out testdata/golden]

PNG files go to png/*.png; png/manifest.txt has, for each file, dtype and channels requested,
the shape TensorFlow returns and every sample:

    image <file> <uint8|uint16> <channels requested> <height> <width> <channels> <samples...>

src/recordflow/image/png_golden_test.cc decodes each file with recordflow and compares exactly.
The inputs cover what libpng's simplified API got wrong (it treats 16-bit samples and files
with a gAMA chunk as linear light and converts them): 16-bit gray, gray+alpha, RGB and RGBA;
8-bit gray+alpha; palette with and without tRNS; 8-bit RGB with gAMA 1/2.2, gAMA 1.0, cHRM,
sRGB and iCCP chunks; 8-bit and 1-bit gray. The pixel values are fixed
(arithmetic, no randomness), and zlib's output is deterministic, so a rerun with the same
TensorFlow and Pillow rewrites the same bytes.
"""

from __future__ import annotations

import argparse
import io
import os
import struct
import zlib

import numpy as np
import tensorflow as tf
from PIL import Image, ImageCms

H, W = 5, 6


def samples16(channels: int) -> np.ndarray:
    # Values that tell the high byte, the rounded value and a gamma curve apart.
    y, x, c = np.meshgrid(np.arange(H), np.arange(W), np.arange(channels), indexing="ij")
    v = (x * 11117 + y * 9973 + c * 21011 + 255) % 65536
    v[0, 0, :] = 0x00FF
    v[0, 1, :] = 0xFF00
    v[0, 2, :] = 0xFFFF
    v[0, 3, :] = 0x7F80
    return v.astype(np.uint16)


def samples8(channels: int) -> np.ndarray:
    y, x, c = np.meshgrid(np.arange(H), np.arange(W), np.arange(channels), indexing="ij")
    return ((x * 43 + y * 29 + c * 97 + 3) % 256).astype(np.uint8)


def add_chunks(png: bytes, chunks: list[tuple[bytes, bytes]]) -> bytes:
    """Inserts chunks right after IHDR (where gAMA, cHRM, sRGB and iCCP belong)."""
    ihdr_end = 8 + 8 + 13 + 4
    out = png[:ihdr_end]
    for kind, data in chunks:
        out += struct.pack(">I", len(data)) + kind + data
        out += struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return out + png[ihdr_end:]


def pil_png(im: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "PNG", **kw)
    return buf.getvalue()


def make_inputs() -> dict[str, bytes]:
    enc = lambda a: tf.io.encode_png(a).numpy()  # noqa: E731
    gamma_22 = (b"gAMA", struct.pack(">I", 45455))
    gamma_10 = (b"gAMA", struct.pack(">I", 100000))
    chrm = (b"cHRM", struct.pack(">8I", 31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000))
    srgb = (b"sRGB", b"\x00")
    files = {
        "gray16.png": enc(samples16(1)),
        "gray_alpha16.png": enc(samples16(2)),
        "rgb16.png": enc(samples16(3)),
        "rgba16.png": enc(samples16(4)),
        "rgb16_gamma10.png": add_chunks(enc(samples16(3)), [gamma_10]),
        "gray_alpha8.png": enc(samples8(2)),
        "rgb8_gamma22.png": add_chunks(enc(samples8(3)), [gamma_22]),
        "rgb8_gamma10.png": add_chunks(enc(samples8(3)), [gamma_10]),
        "rgba8_gamma22_chrm.png": add_chunks(enc(samples8(4)), [gamma_22, chrm]),
        "rgb8_srgb.png": add_chunks(enc(samples8(3)), [srgb, gamma_22]),
    }
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    files["rgb8_iccp.png"] = pil_png(Image.fromarray(samples8(3)), icc_profile=icc)
    pal = Image.fromarray(samples8(1)[..., 0] % 7, mode="L").convert("P")
    pal.putpalette([v for i in range(7) for v in (i * 36, 255 - i * 30, (i * 77) % 256)])
    files["palette.png"] = pil_png(pal)
    files["palette_trns.png"] = pil_png(pal, transparency=bytes([0, 128, 255, 7, 9, 11, 200]))
    files["gray8_gamma22.png"] = add_chunks(
        pil_png(Image.fromarray(samples8(1)[..., 0])), [gamma_22])
    files["gray1.png"] = pil_png(Image.fromarray(samples8(1)[..., 0] > 128))
    return files


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    out = os.path.join(args.out, "png")
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, data in sorted(make_inputs().items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        for dtype in (tf.uint8, tf.uint16):
            for channels in (0, 3):
                a = tf.io.decode_png(data, channels=channels, dtype=dtype).numpy()
                h, w, c = a.shape
                lines.append(f"image {name} {dtype.name} {channels} {h} {w} {c} " +
                             " ".join(str(int(v)) for v in a.ravel()))
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write(f"# tf.io.decode_png of each file, TensorFlow {tf.__version__}\n")
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} decodes of {len(lines) // 4} files to {out}")


if __name__ == "__main__":
    main()
