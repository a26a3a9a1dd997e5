"""Text output in a pipe or a file: no line ends in the blanks rich pads table cells (and a
table's title) with to the table's width; a terminal gets rich's output as it is."""

import io

import pytest
from clirun import run

from kvplan.render.text import RightStripped


@pytest.mark.parametrize("args", [
    ("plan", "llama-3.1-8b-instruct", "--gpu", "h100"),
    ("plan", "llama-3.1-8b-instruct", "--gpu", "h100", "--engine-version", "0.10.0"),  # warnings
    ("models",),
    ("sweep", "llama-3.1-8b-instruct", "--gpus", "h100,a100-sxm-80gb"),
])
def test_piped_text_lines_do_not_end_in_blanks(capsys, args):
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert out.count("\n") > 5
    for line in (out + err).splitlines():
        assert line == line.rstrip(), repr(line)


def test_right_stripped_passes_whole_lines_and_keeps_inner_blanks():
    sink = io.StringIO()
    f = RightStripped(sink)
    f.write("a  b   \nc ")
    assert sink.getvalue() == "a  b\n"  # "c " waits for the rest of its line
    f.write(" d \t\n\n e \n")
    assert sink.getvalue() == "a  b\nc  d\n\n e\n"
    f.write("tail ")
    f.flush()  # an unfinished line goes out as it is
    assert sink.getvalue() == "a  b\nc  d\n\n e\ntail "
    assert not f.isatty()
