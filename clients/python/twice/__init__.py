"""Python client of Twice, the server of recurrent language models over
long documents.

Send a document once; every later question resumes from its stored state::

    import twice

    with twice.Client("127.0.0.1:50051") as client:
        doc = client.ingest(path="report.txt")
        answer = client.ask(doc, "what is vokan ?", mode="read_twice")
        print(answer.text, answer.usage.tokens_reused)

:class:`Client` blocks; :class:`twice.aio.Client` is its asyncio twin.
Failed calls raise :class:`TwiceError` subclasses (:class:`NotFound`,
:class:`InvalidArgument`, ...) carrying the gRPC code and the server's
message. The gRPC stubs are generated from the Twice protos on first use
(see ``twice._stubs``).
"""

from .client import DEFAULT_ADDRESS, Client
from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded,
                     FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                     PermissionDenied, ResourceExhausted, TwiceError, Unauthenticated,
                     Unavailable, Unimplemented)
from .types import (Answer, Document, Mode, Model, Progress, Question, Sampling, Segment,
                    TlsOptions, Usage)

__all__ = [
    "DEFAULT_ADDRESS", "Client",
    "Aborted", "AlreadyExists", "Cancelled", "DataLoss", "DeadlineExceeded",
    "FailedPrecondition", "Internal", "InvalidArgument", "NotFound", "OutOfRange",
    "PermissionDenied", "ResourceExhausted", "TwiceError", "Unauthenticated", "Unavailable",
    "Unimplemented",
    "Answer", "Document", "Mode", "Model", "Progress", "Question", "Sampling", "Segment",
    "TlsOptions", "Usage",
]
