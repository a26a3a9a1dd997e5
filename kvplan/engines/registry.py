"""The one place that lists engines. Everything else (planner, renderers, `kvplan check`) asks
here; adding an engine is one module implementing `Engine` (its ENGINE) plus its name in
BUILT_IN (a plugin calls `register` itself). A built-in engine's module is imported when the
engine is first asked for (`get`, `engines()`, ENGINES), so a plan imports only its own
engine's module (benchmarks/cli_speed.py measures the start-up)."""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from . import DEFAULT_ENGINE
from .base import Coefficients, Engine

# The built-in engines, in the order `compare`, `--engine all` and the docs list them: each is
# the module kvplan.engines.<name>, whose ENGINE is registered when first asked for (a plan
# imports only its own engine's module); plugins follow in registration order.
BUILT_IN = ("vllm", "sglang", "tgi", "trtllm")
_ORDER: list[str] = list(BUILT_IN)  # every engine's name; mutated by register / unregister
_LOADED: dict[str, Engine] = {}  # the engines imported so far
DEFAULT = DEFAULT_ENGINE  # the engine planned when none is named
if TYPE_CHECKING:  # module attributes computed on access (__getattr__ below)
    ENGINES: dict[str, Engine]  # every engine by name: engines()
    NAMES: tuple[str, ...]  # every engine's name: names()


def register(engine: Engine) -> Engine:
    """Add an engine under its `name` (lower case, not taken yet); returns it."""
    name = engine.name
    if not name or name != name.lower().strip():
        raise ValueError(f"engine name {name!r} must be lower case without spaces around it")
    if name in _ORDER:
        raise ValueError(f"an engine named {name!r} is already registered")
    _add(engine)
    _ORDER.append(name)
    return engine


def _add(engine: Engine) -> None:
    """Keep `engine`, once the engine whose calibration it borrows is known to have a fit."""
    cal = engine.calibration
    lender = engine if cal.borrows is None else (get(cal.borrows) if cal.borrows in _ORDER
                                                 else None)
    if lender is None or lender.calibration.coefficients is None:
        raise ValueError(f"engine {engine.name!r} borrows the calibration of {cal.borrows!r}, "
                         "which is not a registered engine with its own fit")
    _LOADED[engine.name] = engine


def unregister(name: str) -> None:
    """Remove a registered engine (a plugin's tests clean up with this)."""
    if name == DEFAULT:
        raise ValueError(f"the default engine {name!r} cannot be unregistered")
    if name not in _ORDER:
        raise ValueError(f"no engine named {name!r} is registered")
    _ORDER.remove(name)
    _LOADED.pop(name, None)


def names() -> tuple[str, ...]:
    """Every registered engine's name, in registration order (imports none of them)."""
    return tuple(_ORDER)


def engines() -> dict[str, Engine]:
    """Every registered engine by name, in registration order (imports the built-in ones)."""
    return {name: get(name) for name in _ORDER}


def __getattr__(attr: str) -> Any:
    # Computed on each access, so `from .registry import NAMES` inside a function sees engines
    # registered after this module was imported; ENGINES (name → engine) imports them all.
    if attr == "NAMES":
        return names()
    if attr == "ENGINES":
        return engines()
    raise AttributeError(attr)


def spelled() -> str:
    """The engine names as help text reads them: 'vllm, sglang, tgi or trtllm'."""
    *rest, last = names()
    return f"{', '.join(rest)} or {last}" if rest else last


def get(name: str) -> Engine:
    """The engine called `name`, or an error naming the known ones."""
    key = name.lower().strip()
    engine = _LOADED.get(key)
    if engine is None and key in _ORDER:  # a built-in engine not imported yet
        _add(importlib.import_module(f"{__package__}.{key}").ENGINE)
        engine = _LOADED[key]
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
    return {e.name: e.calibration.coefficients for e in engines().values()
            if e.calibration.coefficients is not None}


def calibrated_by(engine: Engine) -> Engine:
    """The engine whose fitted latency coefficients `engine` uses: itself, or the one it
    borrows from (kvplan/perf/step.py)."""
    cal = engine.calibration
    return engine if cal.borrows is None else get(cal.borrows)

