#!/usr/bin/env python3
"""Writes the seed corpus for image_probe_fuzzer into fuzz/corpus/image_probe/ (needs Pillow).

Small images of every supported format and JPEG variant (4:2:0, 4:4:4, grayscale, CMYK,
progressive, EXIF orientation), plus truncated and damaged copies.
"""
import io
import os

from PIL import Image
from seedlib import write_seeds  # (next to this script)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "image_probe")


def img(mode="RGB", size=(9, 7)):
    im = Image.new("RGB", size)
    im.putdata([((x * 40) % 256, (y * 60) % 256, (x * y * 9) % 256)
                for y in range(size[1]) for x in range(size[0])])
    return im.convert(mode)


def save(im, fmt, **kw):
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def main():
    os.makedirs(OUT, exist_ok=True)
    exif = Image.Exif()
    exif[0x0112] = 6
    seeds = {
        "jpeg_420": save(img(), "JPEG", quality=80, subsampling=2),
        "jpeg_444": save(img(), "JPEG", quality=80, subsampling=0),
        "jpeg_gray": save(img("L"), "JPEG"),
        "jpeg_cmyk": save(img("CMYK"), "JPEG"),
        "jpeg_progressive": save(img(), "JPEG", progressive=True),
        "jpeg_exif6": save(img(), "JPEG", exif=exif.tobytes()),
        "png_rgb": save(img(), "PNG"),
        "png_rgba": save(img("RGBA"), "PNG"),
        "png_gray": save(img("L"), "PNG"),
        "png_palette": save(img("P"), "PNG"),
        "gif": save(img("P"), "GIF"),
        "bmp24": save(img(), "BMP"),
        "bmp8": save(img("P"), "BMP"),
        "webp_lossy": save(img(), "WEBP", quality=50),
        "webp_lossless": save(img("RGBA"), "WEBP", lossless=True),
    }
    seeds["jpeg_truncated"] = seeds["jpeg_420"][: len(seeds["jpeg_420"]) * 2 // 3]
    damaged = bytearray(seeds["jpeg_444"])
    damaged[len(damaged) // 2] ^= 0xFF
    seeds["jpeg_damaged"] = bytes(damaged)
    seeds["png_truncated"] = seeds["png_rgb"][:40]
    write_seeds(seeds, OUT)


if __name__ == "__main__":
    main()
