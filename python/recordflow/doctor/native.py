"""Which native op does what a Python map does: found by running the map on the pipeline's
first element (an encoded image in, a square array out: an rf.vision preset; serialized
Examples in, some of their features out: .parse)."""

from __future__ import annotations

from typing import Any

import numpy as np

from recordflow.dataset import Dataset
from recordflow.doctor.measure import _ops, _with_ops

_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")


def _first_value(v: Any) -> Any:
    """A value of a feature, or of its first row when batched."""
    while isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.dtype == object):
        if len(v) == 0:
            return None
        v = v[0]
    return v


def _features_of(x: Any) -> dict | None:
    """The features an element carries: a parsed dict as it is, a serialized Example (or a
    batch of them) parsed; None for anything else."""
    from recordflow import Example
    if isinstance(x, dict):
        return x
    record = _first_value(x) if isinstance(x, (list, tuple)) else x
    if isinstance(record, (bytes, bytearray, memoryview)):
        try:
            return Example.parse(bytes(record))
        except Exception:
            return None
    return None


def _square_image(y: Any) -> np.ndarray | None:
    """An HxWx3 (or NxHxWx3) array with H == W in a map's output, or None."""
    values = y.values() if isinstance(y, dict) else (y if isinstance(y, (list, tuple)) else [y])
    for v in values:
        if isinstance(v, np.ndarray) and v.ndim in (3, 4) and v.shape[-1] == 3 and v.shape[-2] == v.shape[-3]:
            return v
    return None


def _native_replacement(ds: Dataset, op_index: int) -> dict | None:
    """The native op that does what the Python map at ``op_index`` does, found by running it
    on the pipeline's first element: a decode + square resize of an encoded image becomes a
    rf.vision preset (train when two calls on the same element differ: random crops, eval
    otherwise); a function from serialized Examples to some of their features becomes .parse.
    None when the map is neither (the doctor then does not offer a native op)."""
    ops = _ops(ds)
    fn = ops[op_index].fn
    try:
        it = iter(_with_ops(ds, ops[:op_index]))
        try:
            x = next(it)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        y1, y2 = fn(x), fn(x)
    except Exception:
        return None
    features = _features_of(x)
    if not features:
        return None
    image_keys = [k for k, v in features.items()
                  if isinstance(_first_value(v), (bytes, bytearray))
                  and bytes(_first_value(v)[:8]).startswith(_IMAGE_MAGIC)]
    out1 = _square_image(y1)
    if image_keys and out1 is not None:
        size = int(out1.shape[-2])
        out2 = _square_image(y2)
        random = out2 is None or out1.shape != out2.shape or not np.array_equal(out1, out2)
        args = [f"size={size}"]
        if image_keys[0] != "image/encoded":
            args.append(f"image_key={image_keys[0]!r}")
        labels = [k for k in features if "label" in k.lower()]
        if labels and labels[0] != "image/class/label":
            args.append(f"label_key={labels[0]!r}")
        preset = "imagenet_train" if random else "imagenet_eval"
        return {"op": f"rf.vision.{preset}({', '.join(args)})", "preset": preset, "size": size,
                "image_key": image_keys[0], "label_key": labels[0] if labels else None,
                "replaces_input": not isinstance(x, dict)}
    raw = not isinstance(x, dict)
    if raw and isinstance(y1, dict) and y1 and set(y1) <= set(features):
        keys = ", ".join(repr(k) for k in y1)
        return {"op": f".parse({{{keys}: ...}})", "preset": None, "keys": list(y1),
                "replaces_input": True}
    return None
