"""Run kvplan's real entry point in-process, as a user's shell would."""

import sys

import pytest

from kvplan import cli


def run(capsys, *args):
    """(exit code, stdout, stderr) of `kvplan ARGS…` through cli.main()."""
    old = sys.argv
    sys.argv = ["kvplan", *args]
    try:
        with pytest.raises(SystemExit) as exc:
            cli.main()
    finally:
        sys.argv = old
    out = capsys.readouterr()
    code = exc.value.code if isinstance(exc.value.code, int) else 0
    return code, out.out, out.err
