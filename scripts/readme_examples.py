"""Rewrite the tested examples of the README and of docs/*.md (the fenced blocks after a
`<!-- readme-test -->` marker) with the real output of their commands (80 columns), so no
example is typed by hand. tests/project/test_readme_examples.py checks the result.

    python scripts/readme_examples.py
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!--\s*readme-test(?:\s+exit=(\d+))?(?:\s+lines=(\d+)-(\d+))?\s*-->\s*\n"
                   r"```([a-z]*)\n)(\$ kvplan [^\n]*)((?:\n(?:(?!```).)*?)?)(\n```)", re.DOTALL)


def main() -> int:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}

    def fill(m: re.Match[str]) -> str:
        cmd = m.group(6)
        r = subprocess.run([sys.executable, "-m", "kvplan", *shlex.split(cmd)[2:]],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        want = int(m.group(2) or 0)
        if r.returncode != want:
            sys.exit(f"`{cmd}` exited {r.returncode}, the README says {want}:\n{r.stderr}")
        out = r.stdout.rstrip("\n").splitlines()
        if m.group(3):
            out = out[int(m.group(3)) - 1:int(m.group(4))]
        return m.group(1) + cmd + "\n" + "\n".join(line.rstrip() for line in out) + m.group(8)

    for path in (README, *sorted((ROOT / "docs").glob("*.md"))):
        text = path.read_text()
        new = BLOCK.sub(fill, text)
        if new != text:
            path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
