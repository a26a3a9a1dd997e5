"""The one place that lists engines. Everything else (planner, renderers, `kvplan check`) asks
here; adding an engine is one module implementing `Engine` plus one line below."""

from __future__ import annotations

import difflib

from ..errors import InvalidInputError
from . import sglang, tgi, trtllm, vllm
from .base import Engine

ENGINES: dict[str, Engine] = {e.name: e for e in (
    vllm.ENGINE,
    sglang.ENGINE,
    tgi.ENGINE,
    trtllm.ENGINE,
)}
NAMES: tuple[str, ...] = tuple(ENGINES)


def get(name: str) -> Engine:
    """The engine called `name`, or an error naming the known ones."""
    engine = ENGINES.get(name.lower().strip())
    if engine is None:
        close = difflib.get_close_matches(name.lower(), NAMES, n=1, cutoff=0.5)
        raise InvalidInputError(f"unknown --engine {name!r}",
                                hint=(f"did you mean {close[0]!r}? " if close else "")
                                + "use " + ", ".join(NAMES))
    return engine
