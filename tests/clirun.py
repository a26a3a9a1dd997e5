"""Run kvplan's real entry point in-process, as a user's shell would; record what it opens."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvplan import cli

_OPENED: list[str] | None = None


def _hook(event: str, args: tuple) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.path.abspath(os.fsdecode(args[0])))


sys.addaudithook(_hook)  # audit hooks stay for the process: a no-op outside `opens()`


@contextlib.contextmanager
def opens() -> Iterator[list[str]]:
    """Every path opened (open(), os.open(), io.open) inside the block, made absolute."""
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


def reads_under(opened: list[str], folder: Path) -> list[str]:
    real = folder.resolve()
    return [p for p in opened if Path(p).resolve().is_relative_to(real)]


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


def call(*args: str, encoding: str = "utf-8") -> tuple[object, str, str]:
    """(exit code, stdout, stderr) of `kvplan ARGS…` through cli.main(), without pytest's capture
    (usable inside Hypothesis examples); stdout and stderr are byte streams in `encoding`, as
    PYTHONIOENCODING or the locale would make them."""
    old = sys.argv
    sys.argv = ["kvplan", *args]
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding, write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding=encoding, write_through=True)
    code: object = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as e:
        code = e.code if e.code is not None else 0
    finally:
        sys.argv = old
    return code, _text(out, encoding), _text(err, encoding)


def _text(stream: io.TextIOWrapper, encoding: str) -> str:
    stream.flush()
    raw = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return raw.decode(encoding)  # strict: a byte the encoding cannot hold is a failure


# ------------------------------------------------------------------ the fuzz campaign's contract
# Every fuzzed property (tests/cli/test_fuzz.py, tests/deploy/test_untrusted.py) runs its inputs
# through `contract()`. How many inputs each gets is its share of the Hypothesis profile's
# max_examples (tests/conftest.py): the README's `pytest` loads Hypothesis's default (100, a
# quick pass), `.ci/run` the campaign profile.

SHARES = {"flags": 6, "configs": 5, "headers": 3, "files": 7, "structured": 4, "containment": 3,
          "hub": 2}
PER_INPUT_S = 10.0  # a hang or a quadratic blow-up exceeds this by far; real inputs take < 0.5 s
# Planted credentials: the campaign writes them into deployment files, the environment and a
# file outside the boundary; none may appear in any output.
PLANTED = ("hf_PLANTEDhfTOKEN0123456789", "sk-PLANTEDapiKEY0123456789", "PLANTEDplainKEY42",
           "OUTSIDE-SECRET")


def examples(prop: str, profile: object = None) -> int:
    """Inputs for one property under a Hypothesis profile (default: the one loaded)."""
    from hypothesis import settings

    total = (profile if isinstance(profile, settings) else settings()).max_examples
    return max(1, total * SHARES[prop] // sum(SHARES.values()))


def _installed() -> tuple[Path, ...]:
    """What kvplan may always open: its own package and bundled data, the Python installation."""
    import site
    import sysconfig

    from kvplan.sources.catalog import data_dir

    roots = {Path(cli.__file__).resolve().parents[1], data_dir("model_specs"),
             data_dir("gpu_specs"), Path(sys.prefix), Path(sys.base_prefix),
             Path(sys.exec_prefix), *map(Path, site.getsitepackages()),
             *(Path(p) for p in sysconfig.get_paths().values())}
    return tuple(sorted({r.resolve() for r in roots}))


_INSTALLED: tuple[Path, ...] = ()
# Files no input names: /dev/null, and what filelock reads once at import for its host identity.
_DEVICES = {"/dev/null", "/proc/self/mountinfo", "/proc/sys/kernel/random/boot_id"}


def outside(opened: list[str], allowed: tuple[Path, ...]) -> list[str]:
    """The opened paths that lie outside `allowed` and kvplan's installation."""
    global _INSTALLED
    _INSTALLED = _INSTALLED or _installed()
    roots = tuple(r.resolve() for r in allowed) + _INSTALLED
    bad = []
    for p in opened:
        real = Path(p).resolve()
        if p not in _DEVICES and not any(real.is_relative_to(r) for r in roots):
            bad.append(p)
    return bad


def contract(*args: str, cwd: Path, allowed: tuple[Path, ...] = (), encoding: str = "utf-8",
             secrets: tuple[str, ...] = PLANTED) -> tuple[int, str, str]:
    """`kvplan ARGS…` in-process from `cwd`, held to the campaign's contract: done within
    PER_INPUT_S, exit 0-3, no traceback or internal error, stdout one JSON document when JSON was
    asked for, no secret in any output, nothing opened outside `allowed`, the caches (HF_HOME,
    KVPLAN_CACHE_DIR) and kvplan's installation (an audit hook records every open)."""
    import json
    import time

    shown = " ".join(a[:60] for a in args)[:300]
    old = Path.cwd()
    os.chdir(cwd)
    start = time.monotonic()
    try:
        with opens() as opened:
            code, out, err = call(*args, encoding=encoding)
    finally:
        os.chdir(old)
    elapsed = time.monotonic() - start
    assert elapsed < PER_INPUT_S, f"kvplan {shown}: {elapsed:.1f} s"
    assert code in (0, 1, 2, 3), f"kvplan {shown}: exit {code!r}\n{err[-2000:]}"
    for marker in ("Traceback", "internal error"):
        assert marker not in err and marker not in out, f"kvplan {shown}:\n{err[-3000:]}"
    wants_json = "--json" in args or any(
        a == "--format" and b == "json" for a, b in zip(args, args[1:], strict=False)
    ) or "--format=json" in args
    if wants_json and out.strip():
        json.loads(out)  # stdout is valid JSON alone, success or failure
    leaked = [s for s in secrets if s in out or s in err]
    assert not leaked, f"kvplan {shown}: printed {leaked}\n{out[-2000:]}\n{err[-2000:]}"
    caches = tuple(Path(os.environ[v]) for v in ("HF_HOME", "KVPLAN_CACHE_DIR") if v in os.environ)
    hf = sys.modules.get("huggingface_hub.constants")  # its HF_HOME (the token file), fixed at
    caches += (Path(hf.HF_HOME),) if hf is not None else ()  # import by an earlier test
    escaped = outside(opened, (*allowed, *caches))
    assert not escaped, f"kvplan {shown} (from {cwd}): opened {escaped[:5]}"
    return code, out, err  # type: ignore[return-value]
