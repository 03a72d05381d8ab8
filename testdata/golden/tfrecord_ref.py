"""Pure-Python reference encodings, written independently of recordflow (and of TensorFlow), that
the tests, the golden-file generators and the fuzz seed scripts check recordflow's bytes against:
TFRecord framing with its masked CRC32C, and the protobuf wire pieces a tf.train.Example is made
of. Slow and obviously correct on purpose."""

from __future__ import annotations

import struct

# ---- TFRecord framing ---------------------------------------------------------------------------


def _crc32c_table() -> list[int]:
    # Entry n: the reflected polynomial 0x82F63B78 applied bit by bit to the byte n.
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli), a byte at a time through the table (fast enough for megabytes)."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    """The masked CRC32C TFRecord stores (rotate right by 15, add 0xa282ead8)."""
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payloads) -> bytes:
    """`payloads` framed as one TFRecord file: length, its masked CRC, payload, its masked CRC."""
    out = b""
    for p in payloads:
        length = struct.pack("<Q", len(p))
        out += length + struct.pack("<I", masked(length)) + p + struct.pack("<I", masked(p))
    return out


# ---- protobuf wire pieces -----------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited (wire type 2) field."""
    return tag(field, 2) + varint(len(payload)) + payload


def read_varint(b: bytes, i: int) -> tuple[int, int]:
    """The varint at b[i:] and the index after it."""
    shift = value = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def ld_fields(b: bytes) -> list[tuple[int, bytes]]:
    """(field, payload) of a message made only of length-delimited fields (what TensorFlow writes
    at every level above the value lists)."""
    out, i = [], 0
    while i < len(b):
        t, i = read_varint(b, i)
        assert t & 7 == 2, f"unexpected wire type in {b!r}"
        n, i = read_varint(b, i)
        out.append((t >> 3, b[i:i + n]))
        i += n
    return out
