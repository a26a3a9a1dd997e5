"""With --json every outcome is one JSON object on stdout, valid against `kvplan schema NAME`:
exit 0 and 1 print the command's result, exits 2 and 3 an error object (issue #21 item 18)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from clirun import run

from kvplan.errors import Reason

LLAMA = "llama-3.1-8b-instruct"


def schema(capsys, name: str) -> dict:
    code, out, _ = run(capsys, "schema", name)
    assert code == 0
    return json.loads(out)


def test_schema_default_is_still_the_plan_schema(capsys):
    code, default, _ = run(capsys, "schema")
    assert code == 0 and json.loads(default) == schema(capsys, "plan")
    assert json.loads(default)["title"] == "Plan"


def test_an_unknown_schema_name_is_bad_input(capsys):
    code, out, err = run(capsys, "schema", "nope")
    assert code == 2 and out == "" and "plan, compare, sweep, check, error" in err


@pytest.mark.parametrize("args,exit_code,reason", [
    (["plan", LLAMA, "--gpu", "h100", "--max-num-seqs", "0", "--json"], 2, Reason.BAD_INPUT),
    (["plan", LLAMA, "--json"], 2, Reason.BAD_INPUT),  # a usage error: --gpu is missing
    (["plan", LLAMA, "--gpu", "h1000", "--json"], 2, Reason.NOT_FOUND),
    (["plan", "some-org/some-model", "--gpu", "h100", "--json"], 3, Reason.OFFLINE_MISS),
    (["compare", LLAMA, "--gpu", "h100", "--max-model-len", "0", "--json"], 2, Reason.BAD_INPUT),
    (["sweep", LLAMA, "--gpus", "h1000", "--json"], 2, Reason.BAD_INPUT),
    (["check", "run.sh", "--set", "NOVALUE", "--json"], 2, Reason.BAD_INPUT),
    (["models", "zzzz-no-model", "--format", "json"], 2, Reason.BAD_INPUT),
    (["gpus", "show", "nope", "--format=json"], 2, Reason.NOT_FOUND),
])
def test_every_failure_with_json_prints_one_error_object(capsys, args, exit_code, reason):
    code, out, err = run(capsys, *args)
    data = json.loads(out)
    jsonschema.validate(data, schema(capsys, "error"))
    assert code == exit_code == data["error"]["exit_code"]
    assert data["error"]["code"] == reason.value
    assert data["error"]["message"] and data["error"]["message"] in err  # stderr says it too
    assert data["schema_version"]


def test_without_json_a_failure_prints_nothing_on_stdout(capsys):
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h1000")
    assert code == 2 and out == "" and "unknown GPU" in err


def test_compare_json_has_a_schema_version_and_matches_its_schema(capsys):
    code, out, _ = run(capsys, "compare", LLAMA, "--gpu", "h100", "--max-model-len", "8192",
                       "--json")
    data = json.loads(out)
    assert code == 0 and data["schema_version"] == data["plans"][0]["schema_version"]
    jsonschema.validate(data, schema(capsys, "compare"))


def test_sweep_json_matches_its_schema(capsys):
    code, out, _ = run(capsys, "sweep", LLAMA, "--gpus", "h100,l4", "--max-gpus", "2",
                       "--max-model-len", "8192", "--json")
    data = json.loads(out)
    assert code == 0 and data["schema_version"]
    jsonschema.validate(data, schema(capsys, "sweep"))


def test_sweep_json_with_pruned_candidates_matches_its_schema(capsys):
    """A pruned candidate prints its reason, not the fields it is built from (their schema
    said they were required until 2026-12-03)."""
    code, out, _ = run(capsys, "sweep", "meta-llama/Llama-3.1-70B-Instruct", "--gpus", "h100",
                       "--max-gpus", "2", "--max-model-len", "8192", "--json")
    data = json.loads(out)
    assert data["pruned"] and set(data["pruned"][0]) >= {"reason", "engine", "gpu"}
    jsonschema.validate(data, schema(capsys, "sweep"))


def test_compare_lists_the_engines_that_refuse_and_keeps_the_others(capsys):
    """TensorRT-LLM does not run on AMD GPUs: compare plans the other engines and says why
    that one is missing (JSON `refused`, valid against the schema; the table's last lines)."""
    code, out, _ = run(capsys, "compare", LLAMA, "--gpu", "mi300x", "--max-model-len", "8192",
                       "--json")
    data = json.loads(out)
    jsonschema.validate(data, schema(capsys, "compare"))
    assert code == 0 and "trtllm" not in {p["engine"]["name"] for p in data["plans"]}
    (gone,) = data["refused"]
    assert gone["engine"] == "trtllm" and "NVIDIA GPUs only" in gone["message"]
    assert "--engine vllm" in gone["hint"]
    code, out, _ = run(capsys, "compare", LLAMA, "--gpu", "mi300x", "--max-model-len", "8192")
    assert code == 0 and "not planned TensorRT-LLM: TensorRT-LLM runs on NVIDIA GPUs only" in (
        " ".join(out.split()))


def test_compare_exits_1_when_no_engine_meets_the_latency_target(capsys):
    """As plan and sweep do: every engine fits in memory but misses the TTFT target."""
    code, out, _ = run(capsys, "compare", LLAMA, "--gpu", "h100", "--max-model-len", "8192",
                       "--slo-ttft-ms", "0.001", "--json")
    data = json.loads(out)
    assert code == 1 and all(p["performance"]["meets_slo"] is False for p in data["plans"])
    code, _, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--max-model-len", "8192",
                     "--slo-ttft-ms", "0.001", "--json")
    assert code == 1


def test_check_json_matches_its_schema(capsys, tmp_path):
    f = tmp_path / "run.sh"
    f.write_text(f"vllm serve {LLAMA} --max-model-len 8192\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    data = json.loads(out)
    assert code == 0 and data["deployments"]
    jsonschema.validate(data, schema(capsys, "check"))


BENCH_L40S = "tests/sources/fixtures/bench/vllm_llama-3.2-3b_l40s_results.json"


@pytest.mark.parametrize("name,args", [
    ("models", ["models", "llama-3.1", "--json"]),
    ("models", ["models", "show", "qwen3-30b-a3b", "--json"]),
    ("gpus", ["gpus", "mi3", "--json"]),
    ("gpus", ["gpus", "show", "h200", "--json"]),
    ("calibrate", ["calibrate", BENCH_L40S, "--max-model-len", "4096", "--check", "--json"]),
    ("calibrate", ["calibrate", BENCH_L40S, "--max-model-len", "4096", "--no-leave-one-out",
                   "--json"]),
])
def test_every_json_output_has_a_schema_that_holds_it(capsys, name, args):
    """The catalogue listings and calibrate print JSON too: their schemas forbid fields they
    do not declare, so an output that grows or loses a field fails here."""
    from pathlib import Path

    args = [str(Path(__file__).parents[2] / a) if a == BENCH_L40S else a for a in args]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    jsonschema.validate(json.loads(out), schema(capsys, name))


def test_a_field_the_calibrate_schema_does_not_declare_fails_it(capsys):
    """The check above can fail: an undeclared field is refused."""
    doc = {"schema_version": "1", "mode": "check", "coefficients": [], "runs": [],
           "skipped": {}, "notes": {}, "errors": {}, "max_error": None,
           "worst_median": ["ttft", 1.0], "passed": True}
    jsonschema.validate(doc, schema(capsys, "calibrate"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "surprise": 1}, schema(capsys, "calibrate"))
