"""Generated pages: the `--check` side of a script that writes one."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stale(doc: Path, text: str, script: str) -> bool:
    """Whether `doc` differs from `text` (what `script` generates now); says so on stderr."""
    if doc.exists() and doc.read_text(encoding="utf-8") == text:
        return False
    print(f"{doc.resolve().relative_to(ROOT)} is stale: run python benchmarks/{script}",
          file=sys.stderr)
    return True
