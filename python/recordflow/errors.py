"""recordflow's exceptions.

Every error raised by recordflow derives from :class:`Error` and also from the built-in
exception a Python user would expect to catch (``OSError`` for I/O and corrupt data,
``ValueError`` for bad arguments, ...). ``err.code`` is the C++ status code's name.
"""


class Error(Exception):
    """Base class of every recordflow error."""

    code = "Unknown"


class DataLossError(Error, IOError):
    """Corrupt or truncated data: a bad CRC, bad framing, a broken compressed stream.

    The message names the file, the byte offset and the record index.
    """

    code = "DataLoss"


class InvalidArgumentError(Error, ValueError):
    """A bad option, argument or spec."""

    code = "InvalidArgument"


class SchemaError(InvalidArgumentError):
    """A feature is missing, has the wrong type or the wrong number of values, or a spec is
    invalid; the message names the feature key and the record index."""


class NotFoundError(Error, FileNotFoundError):
    """A file does not exist."""

    code = "NotFound"


class AlreadyExistsError(Error, FileExistsError):
    code = "AlreadyExists"


class PermissionDeniedError(Error, PermissionError):
    code = "PermissionDenied"


class ResourceExhaustedError(Error, OSError):
    """A safety limit was hit (max record size, memory budget) or the disk is full."""

    code = "ResourceExhausted"


class FailedPreconditionError(Error, ValueError):
    """The object is in the wrong state for the call, e.g. writing to a closed writer."""

    code = "FailedPrecondition"


class OutOfRangeError(Error, IndexError):
    code = "OutOfRange"


class UnimplementedError(Error, NotImplementedError):
    code = "Unimplemented"


class InternalError(Error, RuntimeError):
    """A bug in recordflow: please report it."""

    code = "Internal"


class InputOutputError(Error, OSError):
    """The operating system reported an I/O failure."""

    code = "IOError"


class CancelledError(Error):
    code = "Cancelled"


# Used by the C++ extension's single error translator (python/src/errors.cc).
_BY_CODE = {
    cls.code: cls
    for cls in (
        DataLossError,
        InvalidArgumentError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        InputOutputError,
        CancelledError,
    )
}

__all__ = [name for name in dir() if name.endswith("Error")] + ["Error"]


class MapWorkerError(Error, RuntimeError):
    """A worker process of a Python ``map``/``filter`` died (``os._exit``, a signal, out of
    memory) or could not load the callable; the message names its pid, how it ended and the
    element it was processing. The iterator is closed."""

    code = "Aborted"
