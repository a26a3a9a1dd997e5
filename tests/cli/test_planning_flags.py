"""Every command that plans takes plan's planning flags, parsed the same way; help text that
lists engines or exit codes says what the code does (issue #21 items 7, 15, 16, 17)."""

from __future__ import annotations

import json

import pytest
from clirun import run

from kvplan.cli import click_app
from kvplan.engines.registry import ENGINES
from kvplan.knobs import OPTIONS

LLAMA = "llama-3.1-8b-instruct"


def _flags(command: str) -> set[str]:
    """The flags `kvplan COMMAND -h` lists (not those a command takes only to refuse them)."""
    return {d for p in click_app().commands[command].params
            if getattr(p, "param_type_name", "") == "option" and not getattr(p, "hidden", False)
            for d in p.opts}


def test_report_takes_every_planning_flag_plan_takes():
    """…except the --disagg pool flags: a report reviews one deployment (docs/disagg.md), and
    --emit, which writes plan's manifest."""
    from kvplan.cli.plan import disagg_options

    disagg = {"--" + n.replace("_", "-") for n in disagg_options()}
    plan = _flags("plan") - {"--json", "--emit"} - disagg
    assert plan - _flags("report") == set()
    assert disagg & _flags("report") == set()


def test_report_docs_name_exactly_the_plan_flags_report_does_not_take():
    """docs/report.md said report "takes every planning flag `plan` takes"; it takes none of
    plan --disagg's (`--disagg` failed "No such option"). The flags it names as not taken, and
    as report's own, are the commands' own."""
    import re
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "report.md")
                    .read_text().split())
    start = text.index("`report` takes `plan`'s flags")
    taken, rest = text[start:].split(" except ", 1)
    missing, rest = rest.split("A report reviews", 1)
    added = rest[rest.index("It adds"):rest.index(";", rest.index("It adds"))]
    longest = {max(p.opts, key=len) for p in click_app().commands["plan"].params
               if getattr(p, "param_type_name", "") == "option"}
    assert set(re.findall(r"`(--[a-z-]+)`", missing)) == longest - _flags("report")
    own = {max(p.opts, key=len) for p in click_app().commands["report"].params
           if getattr(p, "param_type_name", "") == "option" and not p.hidden} - _flags("plan")
    assert set(re.findall(r"`(--[a-z-]+)`", added)) == own - {"--help"}


@pytest.mark.parametrize("flags", [["--disagg"], ["--prefill-tp", "2", "--decode-replicas", "3"]])
def test_report_refuses_disagg_flags_naming_plan_disagg(capsys, tmp_path, flags):
    """`kvplan report … --disagg` said only "No such option: --disagg": now it says a report
    plans no disaggregated service and which command does (exit 2, nothing written)."""
    out_file = tmp_path / "r.md"
    code, out, err = run(capsys, "report", LLAMA, "--gpu", "h100", *flags, "-o", str(out_file))
    named = ", ".join(f for f in flags if f.startswith("--"))
    assert code == 2 and out == "" and not out_file.exists()
    assert f"kvplan report does not plan disaggregated serving ({named})" in err
    assert "use kvplan plan --disagg" in err and "Traceback" not in err


def test_compare_takes_the_workload_latency_and_price_flags():
    want = {"--slo-ttft-ms", "--slo-tpot-ms", "--gpu-hour-price", "--target-concurrency",
            "--avg-input-tokens", "--avg-output-tokens", "--max-model-len", "--kv-cache-dtype"}
    assert want - _flags("compare") == set()


@pytest.mark.parametrize("command", ["report", "compare", "sweep"])
def test_human_lengths_are_read_as_plan_reads_them(capsys, command):
    """`--max-model-len 8k` is 8000 tokens for every command, as for plan."""
    target = ["--gpus", "h100", "--max-gpus", "1"] if command == "sweep" else ["--gpu", "h100"]
    code, out, err = run(capsys, command, LLAMA, *target, "--max-model-len", "8k")
    assert code == 0, err
    if command != "sweep":
        assert "--max-model-len 8000" in out


def test_report_plans_with_the_latency_target_and_price_it_is_given(capsys, monkeypatch):
    """The report's deployment is the plan `kvplan plan` makes of the same flags."""
    from kvplan.render import report as rep

    seen = []
    real = rep.for_model
    monkeypatch.setattr(rep, "for_model", lambda data, **kw: seen.append(data) or real(data, **kw))
    flags = ["--gpu", "h100", "--max-model-len", "8192", "--gpu-hour-price", "7.25",
             "--slo-ttft-ms", "0.001", "--avg-input-tokens", "2000", "--avg-output-tokens", "100"]
    code, out, err = run(capsys, "report", LLAMA, *flags)
    assert code in (0, 1), err
    got = seen[0].plan
    assert got.performance.gpu_hour_price == 7.25 and got.workload.slo_ttft_ms == 0.001
    assert "slo-unmet" in out
    _, planned, _ = run(capsys, "plan", LLAMA, *flags, "--json")
    want = json.loads(planned)
    assert got.model_dump(mode="json")["performance"] == want["performance"]


def test_compare_help_names_every_registered_engine(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = run(capsys, "compare", "--help")
    assert code == 0
    assert [e.label for e in ENGINES.values() if e.label not in out] == []


def test_sweep_engine_help_lists_every_registered_engine(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = run(capsys, "sweep", "--help")
    engine_line = next(line for line in out.splitlines() if "--engine " in line)
    assert code == 0 and [n for n in ENGINES if n not in engine_line] == []


def test_check_help_says_a_refused_value_exits_2(capsys, tmp_path, monkeypatch):
    f = tmp_path / "run.sh"
    f.write_text(f"vllm serve {LLAMA} --gpu-memory-utilization 1.5\n")
    code, _, _ = run(capsys, "check", str(f), "--gpu", "h100")
    assert code == 2  # a value kvplan refuses, in a file that parses
    monkeypatch.setenv("COLUMNS", "400")
    _, out, _ = run(capsys, "check", "--help")
    assert "2 a file cannot be parsed or holds a value kvplan refuses" in " ".join(out.split())


@pytest.mark.parametrize("flag", [o.decls[0] for o in OPTIONS.values()
                                  if o.human and o.bounds() and o.le == 1 << 31])
def test_range_errors_print_exact_integers(capsys, flag):
    code, _, err = run(capsys, "plan", LLAMA, "--gpu", "h100", flag, "0")
    assert code == 2 and "2,147,483,648]" in err and "e+" not in err


def test_a_huge_number_is_echoed_as_typed(capsys):
    typed = "99999999999999999999999"
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--max-model-len", typed,
                         "--json")
    assert code == 2 and f"--max-model-len {typed} is out of range" in err
    assert typed in json.loads(out)["error"]["message"]


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("gpu", ["h100", "v100-sxm2-32gb"])  # bfloat16, and float16 below cc 8.0
def test_a_plans_kv_cache_dtype_is_valid_input_again(capsys, engine, gpu):
    """Issue #21 item 19: the plan reported `inputs.kv_cache_dtype: "bfloat16"` and refused
    `--kv-cache-dtype bfloat16`. The model's own 16-bit dtype is what auto stores: the same plan,
    the same launch line (vLLM's CacheDType lists bfloat16 and float16, vllm/config/cache.py;
    TensorRT-LLM's KvCacheConfig.dtype too; TGI and SGLang keep the model dtype by default)."""
    args = ("plan", LLAMA, "--gpu", gpu, "--engine", engine, "--max-model-len", "8192", "--json")
    code, out, _ = run(capsys, *args)
    first = json.loads(out)
    kv = first["inputs"]["kv_cache_dtype"]["value"]
    assert kv == ("bfloat16" if gpu == "h100" else "float16")
    again_code, again, _ = run(capsys, *args, "--kv-cache-dtype", kv)
    second = json.loads(again)
    assert again_code == code and second["inputs"]["kv_cache_dtype"] == {"value": kv,
                                                                         "source": "cli"}
    assert {k: v for k, v in second.items() if k != "inputs"} == {
        k: v for k, v in first.items() if k != "inputs"}


def test_another_16_bit_kv_dtype_than_the_models_is_refused_naming_it(capsys):
    code, out, _ = run(capsys, "plan", LLAMA, "--gpu", "h100", "--kv-cache-dtype", "float16",
                       "--json")
    error = json.loads(out)["error"]
    assert code == 2 and "model's dtype, bfloat16" in error["message"]
    assert "--dtype float16" in error["hint"]
