"""Exceptions raised by the Twice client.

Every failed call raises a :class:`TwiceError` (or a subclass named after
its gRPC status code) carrying the code and the server's message, so callers
catch what they can handle::

    try:
        client.ask(doc_id, "what is vokan ?")
    except twice.NotFound:
        ...  # ingest it first
"""

from __future__ import annotations

from typing import Dict, Optional, Type

import grpc


class TwiceError(Exception):
    """A call failed. ``code`` is the gRPC status code, ``message`` the
    server's explanation."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class Cancelled(TwiceError):
    code = grpc.StatusCode.CANCELLED


class InvalidArgument(TwiceError):
    """The request is malformed (a bad mode, segment size, position, ...)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(TwiceError):
    """The call ran past its timeout."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(TwiceError):
    """The document (or model) does not exist for this caller."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(TwiceError):
    """A document with this id exists with different content or model."""

    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(TwiceError):
    """The caller's token may not make this call."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(TwiceError):
    """A limit or quota was reached (document size, pins, concurrency)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(TwiceError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(TwiceError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(TwiceError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(TwiceError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(TwiceError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(TwiceError):
    """The server cannot be reached or is draining; retrying may succeed."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(TwiceError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(TwiceError):
    """No token, or a token the server does not know."""

    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: Dict[grpc.StatusCode, Type[TwiceError]] = {
    cls.code: cls
    for cls in (Cancelled, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
                PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted,
                OutOfRange, Unimplemented, Internal, Unavailable, DataLoss,
                Unauthenticated)
}


def error_for(code: grpc.StatusCode, message: str) -> TwiceError:
    """The exception for a status code and message."""
    return _BY_CODE.get(code, TwiceError)(message, code)


def from_rpc_error(error: grpc.RpcError) -> TwiceError:
    """Converts a gRPC error (sync or asyncio) into a :class:`TwiceError`."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else None
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    return error_for(code, details or str(error))
