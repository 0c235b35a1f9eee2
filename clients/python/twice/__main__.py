"""``python3 -m twice``: generate the stubs, or check a server.

    python3 -m twice stubs                       generate the gRPC stubs now
    python3 -m twice health [--server=H:P]       health status of a server
    python3 -m twice models [--server=H:P]       the served models
    python3 -m twice docs   [--server=H:P]       the caller's documents

``--token`` (default ``$TWICE_TOKEN``) and ``--tls-ca`` as the ``twice`` CLI.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import Client, TlsOptions, TwiceError
from ._stubs import StubsError, generate


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m twice", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["stubs", "health", "models", "docs"])
    parser.add_argument("--server", default="127.0.0.1:50051")
    parser.add_argument("--token", default=None)
    parser.add_argument("--tls-ca", default=None)
    parser.add_argument("--timeout-seconds", type=float, default=30)
    args = parser.parse_args(argv)
    try:
        if args.command == "stubs":
            print(generate())
            return 0
        tls = TlsOptions(ca=args.tls_ca) if args.tls_ca else None
        with Client(args.server, token=args.token, tls=tls,
                    timeout=args.timeout_seconds) as client:
            if args.command == "health":
                print(client.health())
            elif args.command == "models":
                for model in client.models():
                    default = " (default)" if model.is_default else ""
                    modes = ",".join(m.value for m in model.modes)
                    print(f"{model.name}\t{model.architecture}\tmodes={modes}{default}")
            else:
                for doc in client.documents():
                    print(f"{doc.document_id}\tmodel={doc.model} tokens={doc.tokens}"
                          f" segments={len(doc.segments)} pinned={doc.pinned}")
        return 0
    except (TwiceError, StubsError) as error:
        print(f"twice: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
