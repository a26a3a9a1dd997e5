"""Serving engines: one module each, listed by `registry` (which re-exports DEFAULT_ENGINE)."""

DEFAULT_ENGINE = "vllm"  # the engine planned when none is named (cheap to import: no engine loads)
