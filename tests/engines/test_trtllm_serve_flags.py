"""trtllm-serve's --max_beam_width and --gpus_per_node, and its other valid flags
(tensorrt_llm/commands/serve.py @00209af, the snapshot kvplan's TensorRT-LLM 1.2.0 reads):
`kvplan check` reads them instead of refusing them as typos."""

from __future__ import annotations

import json

import pytest
from clirun import run

LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def _check(capsys, tmp_path, line: str, gpu: str = "h100") -> tuple[int, dict]:
    f = tmp_path / "serve.sh"
    f.write_text(line + "\n")
    code, out, err = run(capsys, "check", str(f), "--gpu", gpu, "--offline", "--json")
    assert "Traceback" not in err
    return code, json.loads(out)["deployments"][0]


def _codes(row: dict) -> dict[str, str]:
    return {p["code"]: p["severity"] for p in row["problems"]}


def test_gpus_per_node_sets_the_node_layout(capsys, tmp_path):
    """--tp_size 8 on nodes of 4 GPUs (--gpus_per_node 4): 8 / 4 = 2 nodes of 4."""
    code, row = _check(capsys, tmp_path, f"trtllm-serve {LLAMA_70B} --tp_size 8 "
                       "--gpus_per_node 4 --max_seq_len 8192")
    assert code == 0 and row["status"] == "fits"
    nodes = row["plan"]["nodes"]
    assert (nodes["nodes"], nodes["gpus_per_node"]) == (2, 4)
    assert "unknown-flag" not in _codes(row)


@pytest.mark.parametrize(("width", "warned"), [(4, True), (1, False)])
def test_max_beam_width_above_one_is_an_unmodelled_warning(capsys, tmp_path, width, warned):
    code, row = _check(capsys, tmp_path, f"trtllm-serve {LLAMA_8B} --max_beam_width {width} "
                       "--max_seq_len 8192")
    assert code == 0 and row["status"] == "fits"
    assert _codes(row).get("beam-search-not-modelled") == ("warning" if warned else None)
    if warned:
        msg = next(p["message"] for p in row["problems"]
                   if p["code"] == "beam-search-not-modelled")
        assert msg.startswith("--max_beam_width 4: beam search is not modelled")
        assert "up to 4×" in msg


def test_max_beam_width_from_the_options_file(capsys, tmp_path):
    (tmp_path / "extra.yaml").write_text("max_beam_width: 2\n")
    code, row = _check(capsys, tmp_path, f"trtllm-serve {LLAMA_8B} --max_seq_len 8192 "
                       "--extra_llm_api_options extra.yaml")
    assert code == 0
    assert _codes(row).get("beam-search-not-modelled") == "warning"


def test_serve_flags_kvplan_does_not_model_are_kept_not_refused(capsys, tmp_path):
    """--host, --port, --log_level and the boolean --enable_chunked_prefill are serve.py
    options: kept (an info), never `unknown-flag`; a misspelt one is still refused."""
    code, row = _check(capsys, tmp_path, f"trtllm-serve {LLAMA_8B} --host 0.0.0.0 --port 8000 "
                       "--log_level info --enable_chunked_prefill --max_seq_len 8192")
    assert code == 0 and row["status"] == "fits"
    kept = next(p["message"] for p in row["problems"] if p["code"] == "flags-not-modelled")
    assert "--host 0.0.0.0" in kept and "--port 8000" in kept and "--enable_chunked_prefill" in kept
    code, row = _check(capsys, tmp_path, f"trtllm-serve {LLAMA_8B} --max_beam_widht 2")
    assert code == 2
    msg = next(p["message"] for p in row["problems"] if p["code"] == "unknown-flag")
    assert "did you mean --max_beam_width?" in msg


def test_max_beam_width_is_trtllms_alone(capsys):
    code, _, err = run(capsys, "plan", LLAMA_8B, "--gpu", "h100", "--max-beam-width", "2")
    assert code == 2
    assert "--max-beam-width is not a setting vLLM has" in err and "Traceback" not in err
    code, out, err = run(capsys, "plan", LLAMA_8B, "--gpu", "h100", "--engine", "trtllm",
                         "--max-beam-width", "2", "--max-model-len", "8192", "--json")
    assert code == 0, err
    assert "--max_beam_width 2" in json.loads(out)["command"]
