#!/usr/bin/python3
"""Document QA with Twice: ingest a file once, then ask it questions in the
default mode and in read_twice mode, and print what each answer cost.

    PYTHONPATH=clients/python python3 examples/python/doc_qa.py FILE \\
        -q "what is vokan ?" [-q ...] [--server=127.0.0.1:50051] [--model=NAME]

In the default mode a question resumes from the stored document state and
reads only the question; in read_twice mode it also reads the document again
after the question (JRT-Prompt), which helps small-state models recall, at
the price of the document's tokens. ``tokens_reused`` counts the document
tokens the stored state saved.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Run from a checkout without installing anything.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

import twice  # noqa: E402


def print_progress(progress: twice.Progress) -> None:
    if not progress.done:
        print(f"\ringest {progress.document_id}: tokens {progress.tokens_done}/"
              f"{progress.tokens_total}, {progress.tokens_per_second:.0f} tok/s",
              end="", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path, help="UTF-8 text file")
    parser.add_argument("-q", "--question", action="append", required=True,
                        help="a question (repeat for more)")
    parser.add_argument("--server", default=twice.DEFAULT_ADDRESS)
    parser.add_argument("--model", default=None, help="default: the server's")
    parser.add_argument("--token", default=None, help="default: $TWICE_TOKEN")
    parser.add_argument("--tls-ca", default=None, help="PEM CA: connect over TLS")
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()

    tls = twice.TlsOptions(ca=args.tls_ca) if args.tls_ca else None
    try:
        with twice.Client(args.server, token=args.token, tls=tls, timeout=600) as client:
            doc = client.ingest(path=args.file, model=args.model, progress=print_progress)
            print(f"\ndocument {doc.document_id}: {doc.tokens} tokens, "
                  f"{len(doc.segments)} segments, model {doc.model}", file=sys.stderr)
            model = next(m for m in client.models() if m.name == doc.model)
            modes = [m for m in (twice.Mode.DEFAULT, twice.Mode.READ_TWICE)
                     if m in model.modes]
            for question in args.question:
                print(f"Q: {question}")
                for mode in modes:
                    answer = client.ask(doc, question, mode=mode, max_tokens=args.max_tokens)
                    u = answer.usage
                    print(f"  [{mode.value:>10}] {answer.text.strip()}")
                    print(f"               prefilled={u.tokens_prefilled} "
                          f"reused={u.tokens_reused} decoded={u.tokens_decoded} "
                          f"ttft={u.ttft_ms:.1f}ms total={u.total_ms:.1f}ms")
    except twice.TwiceError as error:
        print(f"doc_qa: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
