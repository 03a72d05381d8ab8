#!/usr/bin/env python3
"""Writes seeds for the image safety limits and PNG sample formats into fuzz/corpus/image_probe/
and fuzz/corpus/image_decode/ (needs NumPy and Pillow; the 704-scan progressive JPEG seed is
written by fuzz/make_many_scan_jpeg.cc).

GIF frames far larger than their logical screen (the max_pixels / screen-area checks), 16-bit
and gAMA PNGs (decoded without colour management), a palette PNG with tRNS, and truncated or
CRC-broken PNG / GIF / BMP files (the structure check).
"""
import io
import os
import struct
import zlib

import numpy as np
from PIL import Image
from seedlib import write_seeds  # (next to this script)

HERE = os.path.dirname(os.path.abspath(__file__))
OUTS = [os.path.join(HERE, "corpus", "image_probe"), os.path.join(HERE, "corpus", "image_decode")]


def gif_frame(screen, frame, lzw=b"\x02\x02\x4c\x01\x00"):
    gif = b"GIF89a" + struct.pack("<HH", *screen) + b"\xf1\x00\x00"
    gif += b"\x00\x00\x00\xff\x00\x00\x00\xff\x00\x00\x00\xff"
    return gif + b"\x2c" + struct.pack("<HHHH", 0, 0, *frame) + b"\x00" + lzw + b"\x3b"


def png16(channels):
    a = (np.arange(6 * 5 * channels, dtype=np.uint32).reshape(5, 6, channels) * 2731) % 65536
    color_type = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    raw = b"".join(b"\x00" + a[y].astype(">u2").tobytes() for y in range(5))
    return png_file(6, 5, 16, color_type, zlib.compress(raw))


def png_file(w, h, depth, color_type, idat, extra=()):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0))
    for t, d in extra:
        out += chunk(t, d)
    return out + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def save(a, fmt, **kw):
    b = io.BytesIO()
    Image.fromarray(a).save(b, fmt, **kw)
    return b.getvalue()


def main():
    rgb = ((np.arange(7 * 9 * 3).reshape(7, 9, 3) * 37) % 256).astype(np.uint8)
    png = save(rgb, "PNG")
    gif = save(rgb[..., 0] // 64, "GIF")
    bmp = save(rgb, "BMP")
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(7))
    at = png.index(b"IDAT")
    crc_at = at + 4 + struct.unpack(">I", png[at - 4:at])[0]
    pal = Image.fromarray(rgb[..., 0] % 5).convert("P")
    b = io.BytesIO()
    pal.save(b, "PNG", transparency=bytes([0, 80, 160, 240, 255]))
    seeds = {
        "gif_huge_frame_tiny_screen": gif_frame((1, 1), (65535, 65535)),
        "gif_frame_over_screen": gif_frame((2, 2), (4096, 4096)),
        "png_gray16": png16(1),
        "png_gray_alpha16": png16(2),
        "png_rgb16": png16(3),
        "png_rgba16": png16(4),
        "png_gamma22": png_file(9, 7, 8, 2, zlib.compress(raw),
                                [(b"gAMA", struct.pack(">I", 45455))]),
        "png_palette_trns": b.getvalue(),
        "png_idat_crc": png[:crc_at] + bytes([png[crc_at] ^ 1]) + png[crc_at + 1:],
        "png_no_iend": png[:-12],
        "gif_truncated": gif[:-5],
        "bmp_truncated": bmp[:-40],
    }
    write_seeds(seeds, *OUTS)


if __name__ == "__main__":
    main()
