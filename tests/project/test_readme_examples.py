"""The README's and docs' examples are real: every fenced block of README.md or docs/*.md that
follows a `<!-- readme-test -->` marker starts with `$ kvplan …`; the test runs that command
(in-process, 80 columns, from the repository root) and compares its output with the block,
whitespace normalised. A marker may give the expected exit code, `exit=1` (default 0), and show
an excerpt, `lines=A-B` (1-based, inclusive) of the output. `python scripts/readme_examples.py`
rewrites the blocks."""

import re
import shlex
from pathlib import Path

import pytest
from clirun import run

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

BLOCK = re.compile(r"<!--\s*readme-test(?:\s+exit=(\d+))?(?:\s+lines=(\d+)-(\d+))?\s*-->\s*\n"
                   r"```[a-z]*\n((?:(?!```).)*?)\n```", re.DOTALL)


def examples(paths: tuple[Path, ...] = (README,)) -> list[tuple[str, int, tuple[int, int] | None,
                                                               str]]:
    out = []
    for path in paths:
        for m in BLOCK.finditer(path.read_text()):
            first, _, expected = m.group(4).partition("\n")
            assert first.startswith("$ kvplan "), (
                f"a readme-test block of {path.name} must start with $ kvplan: {first}"
            )
            span = (int(m.group(2)), int(m.group(3))) if m.group(2) else None
            out.append((first[2:], int(m.group(1) or 0), span, expected))
    return out


DOCS = tuple(sorted((ROOT / "docs").glob("*.md")))


def _norm(text: str) -> str:
    return " ".join(text.split())


def test_readme_has_tested_examples():
    assert len(examples()) >= 3


def test_docs_have_tested_examples():
    assert examples(DOCS)


@pytest.mark.parametrize("command,exit_code,span,expected", examples((README, *DOCS)),
                         ids=lambda v: str(v)[:60])
def test_readme_example_output_is_real(capsys, monkeypatch, command, exit_code, span, expected):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run(capsys, *shlex.split(command)[1:])
    assert code == exit_code, err
    if span:
        out = "\n".join(out.splitlines()[span[0] - 1:span[1]])
    assert _norm(out) == _norm(expected), (
        f"the block for `{command}` is stale (python scripts/readme_examples.py):\n{out}")
