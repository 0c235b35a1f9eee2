#!/usr/bin/python3
"""Runs the Python client tests (tests/python_client/*_test.py) with pytest,
as ctest does: ``/usr/bin/python3 tests/python_client/run_tests.py [ARGS]``
(extra arguments go to pytest, e.g. ``-k stream``).

Exit 77 (skipped) when Debian's python3-grpcio, python3-protobuf or
python3-pytest is missing (scripts/setup.sh installs them); the tests need
twice-server built (see server_process.py for where it is looked up).
"""

import os
import sys


def main() -> int:
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
        import pytest
    except ImportError as error:
        print(f"skipped: {error} (scripts/setup.sh installs it)")
        return 77
    here = os.path.dirname(os.path.abspath(__file__))
    return int(pytest.main([here, "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))


if __name__ == "__main__":
    sys.exit(main())
