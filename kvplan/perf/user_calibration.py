"""User calibrations in force: coefficients a user fitted on their own benchmark runs
(`kvplan calibrate`), which replace the bundled ones for one engine on one GPU architecture.
Pure (no file is read here: kvplan.sources.calibration reads the file, kvplan.cli applies
--calibration / KVPLAN_CALIBRATION around a command with `user_calibrations`).

kvplan/perf/step.py `coefficients_on` looks them up when it builds a PerfContext, so every
plan, compare, sweep and report made inside the block uses them (docs/calibration.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..engines.base import Coefficients


@dataclass(frozen=True)
class UserCalibration:
    """Coefficients fitted on a user's own runs: for `engine` on GPUs of architecture `arch`
    (GpuSpec.arch) they replace the bundled ones, whatever the engine version. `source` is
    what plans say the figures come from ("user file cal.json")."""

    engine: str
    arch: str
    coefficients: Coefficients
    source: str


_IN_FORCE: ContextVar[tuple[UserCalibration, ...]] = ContextVar("kvplan_user_calibration",
                                                                default=())


@contextmanager
def user_calibrations(*cals: UserCalibration) -> Iterator[None]:
    """Every PerfContext built inside this block uses `cals` where engine × architecture
    match (the innermost block's; the first of several for the same pair)."""
    token = _IN_FORCE.set(cals)
    try:
        yield
    finally:
        _IN_FORCE.reset(token)


def user_calibration(engine: str, arch: str) -> UserCalibration | None:
    """The user calibration in force for this engine × GPU architecture, if any."""
    return next((c for c in _IN_FORCE.get() if c.engine == engine and c.arch == arch), None)
