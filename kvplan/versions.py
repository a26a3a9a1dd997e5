"""Engine release numbers: one parser for every engine (and deployment files)."""

from __future__ import annotations

import re
from functools import lru_cache

from .errors import InvalidInputError

VERSION = re.compile(r"v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?[\w.+-]*")  # linear: no nested repeats


@lru_cache(maxsize=256)
def parse_version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a release such as 0.33.0, v2.3.1, 0.4.6.post1 or 1.0.0rc3.
    Memoised (a sweep asks the same few releases thousands of times)."""
    m = VERSION.fullmatch(text.strip()) if len(text) <= 64 else None
    if not m:
        raise InvalidInputError(f"cannot read --engine-version {text!r}",
                                hint="use a release number such as 0.33.0")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


_POST = re.compile(r"\.?post(\d{1,6})")


def release_key(text: str) -> tuple[int, int, int, int]:
    """parse_version's (major, minor, patch) and the .postN that follows (0 without one), for
    the boundaries that fall between post releases (SGLang's 0.4.1.post5 → 0.4.1.post6)."""
    post = _POST.search(text)
    return (*parse_version(text), int(post.group(1)) if post else 0)
