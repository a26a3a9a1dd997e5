"""Engine release numbers: one parser for every engine (and deployment files).

A release is written as the engines tag it (PEP 440 public versions): two to four numbers, then
at most one pre-release (aN, bN, rcN), one .postN and one .devN, in that order — vLLM v0.8.5.post1,
v0.10.1.1 and v0.10.2rc1; SGLang v0.4.1.post7 and v0.5.0rc0; TGI v3.3.4; TensorRT-LLM v1.2.0rc4
and 1.3.0rc15.post1 (their git tags and release PRs, e.g. github.com/NVIDIA/TensorRT-LLM/pull/14690,
github.com/sgl-project/sglang/pull/9203; TGI's tags, read at v3.3.7, are all plain numbers);
TensorRT-LLM's nightly wheels carry a dated .devN (0.12.0.dev2024073000).
One leading v is dropped: the tags carry it, the plans and launch lines do not.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .errors import InvalidInputError

# linear: no nested repeats
VERSION = re.compile(r"(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?(?:\.\d{1,6})?"
                     r"(?:(?:a|b|rc)\d{1,6})?(?:\.post\d{1,6})?(?:\.dev\d{1,12})?")
EXAMPLE = "0.10.1, v0.8.5.post1 or 1.2.0rc4"


def _match(text: str) -> re.Match[str] | None:
    text = text.strip()
    if text[:1] in ("v", "V"):
        text = text[1:]
    return VERSION.fullmatch(text) if len(text) <= 64 else None


def is_release(text: str) -> bool:
    """Whether `text` is a release number normalize_version takes (a tag such as `latest` or
    `prod-2025` is not)."""
    return _match(text) is not None


def normalize_version(text: str, where: str = "--engine-version") -> str:
    """The release as kvplan writes it (image tags, titles, JSON): `text` without surrounding
    blanks or its leading v. Anything that is not a release number is an InvalidInputError
    naming `where` (the flag, or the file line the release came from) and an example."""
    m = _match(text)
    if m is None:
        raise InvalidInputError(
            f"{where} must be an engine release such as {EXAMPLE}, got {text[:64]!r}",
            hint="the release its image or package is tagged with (a leading v is optional; "
            "'latest' is not a release)",
            code="invalid-engine-version")
    return m.group(0)


@lru_cache(maxsize=256)
def parse_version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a release such as 0.33.0, v2.3.1, 0.4.6.post1 or 1.0.0rc3
    (a pre-release counts as its release). Memoised (a sweep asks the same few releases
    thousands of times)."""
    m = VERSION.fullmatch(normalize_version(text))
    assert m is not None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


_POST = re.compile(r"\.?post(\d{1,6})")


def release_key(text: str) -> tuple[int, int, int, int]:
    """parse_version's (major, minor, patch) and the .postN that follows (0 without one), for
    the boundaries that fall between post releases (SGLang's 0.4.1.post5 → 0.4.1.post6)."""
    post = _POST.search(text)
    return (*parse_version(text), int(post.group(1)) if post else 0)
