"""The one place that lists engines. Everything else (planner, renderers, `kvplan check`) asks
here; adding an engine is one module implementing `Engine` plus one `register` call (below for
the built-in ones; a plugin calls `register` itself)."""

from __future__ import annotations

import difflib
from typing import Any

from ..errors import InvalidInputError
from . import DEFAULT_ENGINE, sglang, tgi, trtllm, vllm
from .base import Coefficients, Engine

# name → engine, in registration order (the order `compare`, `--engine all` and docs list them).
# Mutated only by register / unregister, so every reader sees the same engines.
ENGINES: dict[str, Engine] = {}
DEFAULT = DEFAULT_ENGINE  # the engine planned when none is named


def register(engine: Engine) -> Engine:
    """Add an engine under its `name` (lower case, not taken yet); returns it."""
    name = engine.name
    if not name or name != name.lower().strip():
        raise ValueError(f"engine name {name!r} must be lower case without spaces around it")
    if name in ENGINES:
        raise ValueError(f"an engine named {name!r} is already registered")
    cal = engine.calibration
    lender = ENGINES.get(cal.borrows) if cal.borrows is not None else engine
    if lender is None or lender.calibration.coefficients is None:
        raise ValueError(f"engine {name!r} borrows the calibration of {cal.borrows!r}, "
                         "which is not a registered engine with its own fit")
    ENGINES[name] = engine
    return engine


def unregister(name: str) -> None:
    """Remove a registered engine (a plugin's tests clean up with this)."""
    if name == DEFAULT:
        raise ValueError(f"the default engine {name!r} cannot be unregistered")
    del ENGINES[name]


def names() -> tuple[str, ...]:
    """Every registered engine's name, in registration order."""
    return tuple(ENGINES)


def __getattr__(attr: str) -> Any:
    # NAMES is computed on each access, so `from .registry import NAMES` inside a function
    # sees engines registered after this module was imported.
    if attr == "NAMES":
        return names()
    raise AttributeError(attr)


def spelled() -> str:
    """The engine names as help text reads them: 'vllm, sglang, tgi or trtllm'."""
    *rest, last = names()
    return f"{', '.join(rest)} or {last}" if rest else last


def get(name: str) -> Engine:
    """The engine called `name`, or an error naming the known ones."""
    engine = ENGINES.get(name.lower().strip())
    if engine is None:
        known = names()
        close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.5)
        raise InvalidInputError(f"unknown --engine {name!r}",
                                hint=(f"did you mean {close[0]!r}? " if close else "")
                                + "use " + ", ".join(known))
    return engine


def fitted_coefficients() -> dict[str, Coefficients]:
    """Engine name → its own fitted latency coefficients (engines that borrow are absent): what
    benchmarks/perf_fit.py compares with the committed fit."""
    return {e.name: e.calibration.coefficients for e in ENGINES.values()
            if e.calibration.coefficients is not None}


def calibrated_by(engine: Engine) -> Engine:
    """The engine whose fitted latency coefficients `engine` uses: itself, or the one it
    borrows from (kvplan/perf/step.py)."""
    cal = engine.calibration
    return engine if cal.borrows is None else get(cal.borrows)


for _engine in (vllm.ENGINE, sglang.ENGINE, tgi.ENGINE, trtllm.ENGINE):
    register(_engine)
