"""TGI's --dtype: written into the launch line when given, refused when the launcher does not
take the value (launcher/src/main.rs `enum Dtype`: float16 and bfloat16, v0.9.4–v3.3.7)."""

from __future__ import annotations

import shlex

import pytest
from clirun import run

from kvplan import plan
from kvplan.errors import InvalidInputError

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(("given", "written"), [
    ("float16", "float16"), ("bfloat16", "bfloat16"), ("half", "float16")])
def test_a_given_dtype_is_in_the_launch_line(given, written):
    p = plan(LLAMA, "h100", engine="tgi", dtype=given)
    args = shlex.split(p.command)
    assert args[args.index("--dtype") + 1] == written
    assert p.inputs["dtype"].value == written


def test_no_dtype_flag_without_one_given():
    """Left out (or auto), the launcher leaves the dtype to the server: no flag."""
    assert "--dtype" not in plan(LLAMA, "h100", engine="tgi").command
    assert "--dtype" not in plan(LLAMA, "h100", engine="tgi", dtype="auto").command


def test_float32_is_refused_naming_the_values_the_launcher_takes(capsys):
    with pytest.raises(InvalidInputError) as e:
        plan(LLAMA, "h100", engine="tgi", dtype="float32")
    assert e.value.code == "dtype-unsupported" and e.value.knob == "dtype"
    assert e.value.message == ("--dtype float32 is not a value TGI's launcher takes: its "
                               "--dtype is float16 or bfloat16")
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine", "tgi",
                         "--dtype", "float32")
    assert code == 2 and not out
    assert "float16 or bfloat16" in err
