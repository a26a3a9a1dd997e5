"""kvplan's error hierarchy. The CLI maps each class to a message and an exit code.

Exit codes (the same for every command): 0 fits, 1 does not fit (a result, not an
error), 2 bad usage or bad input, 3 a model source is unavailable.
"""

from __future__ import annotations


def _shown(text: str, n: int = 120) -> str:
    """A name from user input as it appears in a message: quoted, at most n characters."""
    return repr(text if len(text) <= n else text[:n] + "…")


class KvplanError(Exception):
    """Base class. `hint` is the next step a user can take."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UnknownModelError(KvplanError, LookupError):
    def __init__(self, model: str, suggestions: list[str]) -> None:
        self.model = model
        self.suggestions = suggestions
        hint = (
            "did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
            if suggestions
            else "run `kvplan models` to list the catalogue, or pass a path to a config.json"
        )
        super().__init__(f"unknown model {_shown(model)}: not in the catalogue and not a local path", hint=hint)


class UnknownGpuError(KvplanError, LookupError):
    def __init__(self, gpu: str, suggestions: list[str]) -> None:
        self.gpu = gpu
        self.suggestions = suggestions
        hint = (
            "did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
            if suggestions
            else "run `kvplan gpus` to list known GPUs, or pass --gpu-memory-gib"
        )
        super().__init__(f"unknown GPU {_shown(gpu)}", hint=hint)


class InvalidConfigError(KvplanError, ValueError):
    """A model config (or bundled data file) is malformed or lacks a needed field."""

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None,
                 hint: str | None = None) -> None:
        self.path = path
        self.field = field
        where = f"{path}: " if path else ""
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}{what}{message}", hint=hint)


class InvalidInputError(KvplanError, ValueError):
    """An impossible deployment value (utilization 1.5, TP that does not divide heads, …).
    `code` names the refusal for reports (kvplan check rows, JSON); `knob` is the setting at
    fault when there is one (check drops it to find the next refusal)."""

    def __init__(self, message: str, *, hint: str | None = None, code: str = "invalid-input",
                 knob: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.knob = knob


class UnavailableError(KvplanError, ConnectionError):
    """A model source cannot be reached (offline cache miss, gated repo, network failure)."""

    exit_code = 3
