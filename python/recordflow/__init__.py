"""recordflow: TFRecord files written and streamed into training fast, without TensorFlow.

Reading and writing::

    import recordflow as rf
    with rf.RecordWriter("data.tfrecord", index=True) as w:
        w.write(b"payload")
    for record in rf.RecordReader("data.tfrecord"):
        ...
"""

from recordflow import _fsspec, stages, vision
from recordflow._core import (
    IndexedRecordReader,
    RecordReader,
    RecordWriter,
    __version__,
    build_index,
    count_records,
    crc32c,
    crc32c_backend,
    write_index,
)
from recordflow.converter import convert, encode_jpeg, extract, probe_image
from recordflow.dataset import AUTOTUNE, INFINITE, UNKNOWN, Dataset, Iterator
from recordflow.doctor import diagnose
from recordflow.errors import (
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    Error,
    FailedPreconditionError,
    InputOutputError,
    InternalError,
    InvalidArgumentError,
    MapWorkerError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    SchemaError,
    UnimplementedError,
)
from recordflow.example import (
    Example,
    FixedLen,
    Parser,
    Ragged,
    SequenceExample,
    SequenceParser,
    VarLen,
    parse_example,
    parse_sequence_example,
)
from recordflow.parsing import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    RaggedFeature,
    Sparse,
    SparseFeature,
    VarLenFeature,
    decode_raw,
    parse_single_example,
    parse_single_sequence_example,
)
from recordflow.reshard import reshard

_fsspec.install()  # other URL schemes through fsspec, when it is installed

__all__ = [
    "AUTOTUNE",
    "INFINITE",
    "UNKNOWN",
    "Dataset",
    "vision",
    "stages",
    "diagnose",
    "Iterator",
    "Example",
    "SequenceExample",
    "FixedLen",
    "VarLen",
    "Ragged",
    "Parser",
    "parse_example",
    "parse_sequence_example",
    "FixedLenFeature",
    "VarLenFeature",
    "FixedLenSequenceFeature",
    "SparseFeature",
    "Sparse",
    "RaggedFeature",
    "parse_single_example",
    "parse_single_sequence_example",
    "decode_raw",
    "SequenceParser",
    "IndexedRecordReader",
    "RecordReader",
    "RecordWriter",
    "build_index",
    "count_records",
    "crc32c",
    "crc32c_backend",
    "write_index",
    "convert",
    "reshard",
    "extract",
    "probe_image",
    "encode_jpeg",
    "Error",
    "DataLossError",
    "SchemaError",
    "InvalidArgumentError",
    "MapWorkerError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "InputOutputError",
    "CancelledError",
    "__version__",
]

# Framework adapters are imported on first use (rf.torch, rf.jax, rf.keras, rf.tf, rf.ray):
# importing recordflow must not import torch, JAX, TensorFlow or Ray (nor does
# `from recordflow import *`).
_SUBMODULES = ("sharding", "torch", "jax", "keras", "tf", "ray")


def __getattr__(name: str):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"recordflow.{name}")
    raise AttributeError(f"module 'recordflow' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_SUBMODULES))
