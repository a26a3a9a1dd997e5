"""kvplan's error hierarchy. Every error carries a typed `reason`; the CLI turns it into a
message and an exit code, and callers that must tell failures apart read the reason, never
the message.

Exit codes (the same for every command, one table: `EXIT_CODES`): 0 fits, 1 does not fit
(a result, not an error), 2 bad usage or bad input, 3 a model or GPU source is unavailable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final, Literal


class Reason(str, Enum):
    """Why an error was raised, for code that must tell failures apart."""

    BAD_INPUT = "bad-input"  # a value, flag or combination kvplan refuses
    INVALID_CONFIG = "invalid-config"  # a model config or data file is malformed or incomplete
    NOT_FOUND = "not-found"  # no such model, GPU, repo or revision
    GATED = "gated"  # a gated Hub repo this token may not read
    OFFLINE_MISS = "offline-miss"  # offline, and the model is not in the local cache
    NETWORK = "network"  # the Hub could not be reached in time
    HUB_ERROR = "hub-error"  # the Hub answered with an HTTP error
    NO_LOCAL_GPU = "no-local-gpu"  # NVML (its bindings, a driver, a GPU) is not there


EXIT_CODES: Final[Mapping[Reason, int]] = MappingProxyType({
    Reason.BAD_INPUT: 2,
    Reason.INVALID_CONFIG: 2,
    Reason.NOT_FOUND: 2,
    Reason.GATED: 3,
    Reason.OFFLINE_MISS: 3,
    Reason.NETWORK: 3,
    Reason.HUB_ERROR: 3,
    Reason.NO_LOCAL_GPU: 3,
})


def result_exit_code(fits: bool, severities: Iterable[str]) -> int:
    """A planned result's exit code: 0 when it fits and no problem is an error (a missed
    latency target, a workload the serve line refuses), else 1; the same for every command."""
    return 0 if fits and "error" not in severities else 1


# The reasons an UnavailableError may carry (each exits 3).
UnavailableReason = Literal[Reason.GATED, Reason.OFFLINE_MISS, Reason.NETWORK, Reason.HUB_ERROR,
                            Reason.NO_LOCAL_GPU]


def _shown(text: str, n: int = 120) -> str:
    """A name from user input as it appears in a message: quoted, at most n characters."""
    return repr(text if len(text) <= n else text[:n] + "…")


class KvplanError(Exception):
    """Base class. `hint` is the next step a user can take; `reason` says why, for code."""

    def __init__(self, message: str, *, hint: str | None = None,
                 reason: Reason = Reason.BAD_INPUT) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.reason = reason

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.reason]

    def __str__(self) -> str:
        # a hint's second line (a did-you-mean after the next step) indented under the first
        return (self.message if not self.hint
                else f"{self.message}\n  hint: {self.hint.replace(chr(10), chr(10) + '  ')}")


class UnknownModelError(KvplanError, LookupError):
    """No model by that name: not in the catalogue, not a local path (and, when `message`
    says so, not on the Hub). `suggestions` are the closest catalogue ids."""

    def __init__(self, model: str, suggestions: list[str], *, message: str | None = None,
                 hint: str | None = None) -> None:
        self.model = model
        self.suggestions = suggestions
        if hint is None:
            hint = (
                "did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
                if suggestions
                else "run `kvplan models` to list the catalogue, or pass a path to a config.json"
            )
        if message is None:
            message = f"unknown model {_shown(model)}: not in the catalogue and not a local path"
        super().__init__(message, hint=hint, reason=Reason.NOT_FOUND)


class UnknownGpuError(KvplanError, LookupError):
    def __init__(self, gpu: str, suggestions: list[str]) -> None:
        self.gpu = gpu
        self.suggestions = suggestions
        hint = (
            "did you mean " + ", ".join(repr(s) for s in suggestions) + "?"
            if suggestions
            else "run `kvplan gpus` to list known GPUs; for one not listed, plan the closest "
            "with your GPU's memory (--gpu-memory-gib), or run kvplan on it with --gpu local"
        )
        super().__init__(f"unknown GPU {_shown(gpu)}", hint=hint, reason=Reason.NOT_FOUND)


class AmbiguousGpuError(UnknownGpuError):
    """A family name (`a100`) that several catalogue GPUs share: `variants` are (id, name)."""

    def __init__(self, gpu: str, variants: list[tuple[str, str]]) -> None:
        self.gpu = gpu
        self.suggestions = [i for i, _ in variants]
        KvplanError.__init__(
            self, f"GPU {_shown(gpu)} is ambiguous: {len(variants)} catalogue GPUs share the name",
            hint="name one: " + ", ".join(f"{i!r} ({n})" for i, n in variants),
            reason=Reason.NOT_FOUND)


class InvalidConfigError(KvplanError, ValueError):
    """A model config (or bundled data file) is malformed or lacks a needed field. The
    message is `detail` after the path and field, when there are any."""

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None,
                 hint: str | None = None) -> None:
        self.path = path
        self.field = field
        self.detail = message
        where = f"{path}: " if path else ""
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}{what}{message}", hint=hint, reason=Reason.INVALID_CONFIG)


class InvalidInputError(KvplanError, ValueError):
    """An impossible deployment value (utilization 1.5, TP that does not divide heads, …).
    `code` names the refusal for reports (kvplan check rows, JSON); `knob` is the setting at
    fault when there is one (check drops it to find the next refusal)."""

    def __init__(self, message: str, *, hint: str | None = None, code: str = "invalid-input",
                 knob: str | None = None, reason: Reason = Reason.BAD_INPUT) -> None:
        super().__init__(message, hint=hint, reason=reason)
        self.code = code
        self.knob = knob


class UnavailableError(KvplanError, ConnectionError):
    """A model or GPU source cannot be read (offline cache miss, gated repo, network failure,
    no NVML). Every raising site names its reason."""

    def __init__(self, message: str, *, reason: UnavailableReason,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint, reason=reason)
