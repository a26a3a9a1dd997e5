"""vLLM's dotted form of --speculative-config (FlexibleArgumentParser, from 0.9.0: engines/vllm.py
DOTTED_FROM): `--speculative-config.method ngram --speculative-config.num_speculative_tokens 4`
is the same JSON object as `--speculative-config '{"method": "ngram", ...}'`, so `check` plans the
same speculative decoding (it was kept as an unmodelled flag, and the plan had none)."""

from __future__ import annotations

import json
from pathlib import Path

from clirun import call

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
JSON_FORM = ('--speculative-config \'{"method": "ngram", "num_speculative_tokens": 4, '
             '"prompt_lookup_max": 4}\'')
DOTTED = ("--speculative-config.method ngram --speculative-config.num_speculative_tokens 4 "
          "--speculative-config.prompt_lookup_max=4")


def checked(tmp: Path, flags: str) -> dict:
    script = tmp / "serve.sh"
    script.write_text(f"vllm serve {MODEL} --max-model-len 16384 {flags}\n")
    code, out, err = call("check", str(script), "--gpu", "h100", "--offline", "--json")
    assert code == 0, err
    (row,) = json.loads(out)["deployments"]
    return row["plan"]


def test_the_dotted_form_plans_the_same_speculative_decoding(tmp_path: Path):
    want = checked(tmp_path, JSON_FORM)
    got = checked(tmp_path, DOTTED)
    assert want["speculative"] is not None and want["speculative"]["method"] == "ngram"
    assert want["speculative"]["num_speculative_tokens"] == 4
    assert got["speculative"] == want["speculative"]
    assert got["kv_cache"] == want["kv_cache"] and got["memory"] == want["memory"]
    assert got["performance"]["tpot_ms"] == want["performance"]["tpot_ms"]


def test_before_0_9_the_dotted_form_is_refused(tmp_path: Path):
    script = tmp_path / "serve.sh"
    script.write_text("# kvplan: engine-version=0.8.5\n"
                      f"vllm serve {MODEL} --max-model-len 16384 {DOTTED}\n")
    code, out, err = call("check", str(script), "--gpu", "h100", "--offline", "--json")
    (row,) = json.loads(out)["deployments"]
    assert code == 2 and row["status"] == "error", row  # the server would not start
    assert any("0.9.0" in p["message"] for p in row["problems"]), row["problems"]
