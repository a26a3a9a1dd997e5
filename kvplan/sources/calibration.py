"""User calibration files (written by `kvplan calibrate`, read by --calibration and the
KVPLAN_CALIBRATION environment variable): bounded read, every field checked, errors naming
the file and the field.

The file is JSON (docs/calibration.md shows one in full):

    {"format": "kvplan-calibration", "version": 1, "engine": "vllm", "gpu_arch": "Hopper",
     "coefficients": {"gemm_efficiency": 0.52, …all of kvplan.engines.base.Coefficients…},
     "fitted": [...], "kept": {...}, "rows": [...], "errors": {...}, "sources": [...], …}

Only `format`, `version`, `engine`, `gpu_arch` and `coefficients` are read back; the rest
records how the coefficients were found.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..engines.base import Coefficients
from ..errors import InvalidConfigError
from ..perf.fit import BOUNDS
from ..perf.user_calibration import UserCalibration
from . import limits
from .catalog import gpu_specs

FORMAT = "kvplan-calibration"
VERSION = 1
ENV = "KVPLAN_CALIBRATION"
MAX_CALIBRATION_BYTES = 4 * 2**20  # a few hundred rows of provenance at most


def user_calibration(doc: Mapping[str, Any], source: str) -> UserCalibration:
    """The UserCalibration a parsed calibration document describes; InvalidConfigError naming
    the field that is missing or out of range."""
    from ..engines.registry import ENGINES

    def bad(field: str, why: str) -> InvalidConfigError:
        return InvalidConfigError(why, path=source, field=field,
                                  hint="write it again with `kvplan calibrate … -o FILE`")

    if doc.get("format") != FORMAT:
        raise bad("format", f"not a kvplan calibration file (expected {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise bad("version", f"version {str(doc.get('version'))[:20]!r} is not one this kvplan "
                  f"reads ({VERSION})")
    engine = doc.get("engine")
    if not isinstance(engine, str) or engine not in ENGINES:
        raise bad("engine", f"{str(engine)[:40]!r} is not an engine kvplan models "
                  f"({', '.join(ENGINES)})")
    arch = doc.get("gpu_arch")
    if not isinstance(arch, str) or not arch or len(arch) > 64:
        raise bad("gpu_arch", "a GPU architecture name (e.g. Hopper) is needed")
    known = sorted({g.arch for g in gpu_specs()})
    if arch not in known:  # it would apply to no GPU: every plan would ignore the file
        close = difflib.get_close_matches(arch, known, n=1)
        raise bad("gpu_arch", f"{arch!r} is not the architecture of any GPU kvplan knows ("
                  + ", ".join(known) + ")" + (f"; did you mean {close[0]!r}?" if close else ""))
    raw = doc.get("coefficients")
    if not isinstance(raw, Mapping):
        raise bad("coefficients", "an object of the latency coefficients is needed")
    values = {}
    for f in dataclasses.fields(Coefficients):
        v = raw.get(f.name)
        if v is None and f.default is not dataclasses.MISSING:
            v = f.default  # a coefficient added later (burst_share): files written before it
        lo, hi = BOUNDS[f.name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise bad(f"coefficients.{f.name}", f"{str(v)[:20]!r} is not a number in "
                      f"[{lo:g}, {hi:g}]")
        values[f.name] = float(v)
    return UserCalibration(engine=engine, arch=arch, coefficients=Coefficients(**values),
                           source=f"user file {source}")


def load(path: Path) -> UserCalibration:
    """The calibration in the file at `path` (bounded read, every field checked)."""
    text = limits.read_text_limited(path, MAX_CALIBRATION_BYTES, what="calibration file")
    try:
        doc = limits.loads_json(text, where=path.name)
    except InvalidConfigError as e:
        raise InvalidConfigError(e.detail, path=path.name,
                                 hint="pass a file written by `kvplan calibrate … -o FILE`") \
            from None
    if not isinstance(doc, Mapping):
        raise InvalidConfigError("not a kvplan calibration file (a JSON object is expected)",
                                 path=path.name)
    return user_calibration(doc, path.name)


def given(path: Path | None) -> UserCalibration | None:
    """--calibration PATH, else the file KVPLAN_CALIBRATION names, else None. An error says
    which of the two named the file."""
    flag = "--calibration"
    if path is None:
        env = os.environ.get(ENV)
        if not env:
            return None
        path, flag = Path(env), ENV
    try:
        return load(path)
    except InvalidConfigError as e:
        hint = e.hint or "pass a file written by `kvplan calibrate … -o FILE`"
        raise InvalidConfigError(e.detail, path=f"{flag} {e.path}" if e.path else flag,
                                 field=e.field,
                                 hint=hint + (f", or unset {ENV}" if flag == ENV else "")
                                 ) from None
