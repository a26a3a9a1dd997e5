"""`--limit-mm-per-prompt.MODALITY N` (vLLM's dotted form of a dict flag) written together with the
JSON form `--limit-mm-per-prompt '{…}'`.

vLLM 0.12.0 (the wheel's vllm/utils/argparse_utils.py, FlexibleArgumentParser.parse_args): every
`--FLAG.KEY VALUE` is taken out of the arguments, the keys of one flag are merged into one dict
(`dict_args`, a later key overriding an earlier one), and that dict is appended as
`--FLAG JSON` after all the other arguments. vllm/engine/arg_utils.py adds
`--limit-mm-per-prompt` with argparse's plain store action (type union_dict_and_str, JSON-decoded),
so the last value wins: the dotted keys replace the whole JSON object, whichever came first, and
the modalities only the JSON names are dropped, not merged.
"""

from __future__ import annotations

import pytest

from kvplan.deploy.commands import DeployParseError, Templates, parse_args

JSON = '{"image": 2, "video": 1}'


def _limits(argv: list[str]):
    f = parse_args(["org/model", *argv], "vllm", file="f", line=1, templates=Templates({}),
                   text="vllm serve")
    return f.knobs["limit_mm_per_prompt"], f.notes


@pytest.mark.parametrize("argv", [
    ["--limit-mm-per-prompt", JSON, "--limit-mm-per-prompt.image", "4"],  # JSON, then dotted
    ["--limit-mm-per-prompt.image", "4", "--limit-mm-per-prompt", JSON],  # dotted, then JSON
    ["--limit-mm-per-prompt.image=4", f"--limit-mm-per-prompt={JSON}"],
])
def test_dotted_keys_replace_the_json_object_in_either_order(argv):
    limits, notes = _limits(argv)
    assert limits == {"image": 4}  # not {"image": 4, "video": 1}: video is dropped
    assert any("is replaced by the --limit-mm-per-prompt.MODALITY settings" in n for n in notes)


def test_dotted_keys_merge_among_themselves_a_later_one_winning():
    limits, notes = _limits(["--limit-mm-per-prompt.image", "4", "--limit-mm-per-prompt.video",
                             "0", "--limit-mm-per-prompt.image=3"])
    assert limits == {"image": 3, "video": 0} and notes == []


def test_the_same_object_both_ways_says_nothing():
    limits, notes = _limits(["--limit-mm-per-prompt", '{"image": 4}',
                             "--limit-mm-per-prompt.image", "4"])
    assert limits == {"image": 4} and notes == []


def test_a_bad_json_object_is_still_an_error_when_replaced():
    """argparse decodes every occurrence of the flag, so a malformed object stops vLLM even
    though the dotted keys would have replaced it."""
    with pytest.raises(DeployParseError, match="--limit-mm-per-prompt"):
        _limits(["--limit-mm-per-prompt", '{"image": lots}', "--limit-mm-per-prompt.image", "4"])
