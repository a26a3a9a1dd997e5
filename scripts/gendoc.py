"""The command line every generated-document script shares: write the document, or with
--check exit 1 when the committed one differs from what the script renders now."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def run(out: Path, render: Callable[[], str], description: str, root: Path) -> int:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not out.exists() or out.read_text() != text:
            script = Path(sys.argv[0]).name
            print(f"{out.relative_to(root)} is out of date: run python scripts/{script}")
            return 1
        return 0
    out.write_text(text)
    return 0
