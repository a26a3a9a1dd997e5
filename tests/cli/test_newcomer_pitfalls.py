"""Issue #16: what a new user trips over. One regression test per item (and per instance of the
same class of mistake found elsewhere)."""

import json
from pathlib import Path

import pytest
from clirun import run

import kvplan
from kvplan.errors import InvalidInputError


def _plan_json(capsys, *args):
    code, out, err = run(capsys, "plan", *args, "--json")
    return code, (json.loads(out) if out.strip() else None), err


# ------------------------------------------------------------ 1: plan . inside a model dir


@pytest.mark.parametrize("ref", [".", "./config.json", "config.json"])
def test_plan_inside_model_directory_serves_the_directory(capsys, tmp_path, monkeypatch, ref):
    from kvplan.sources.catalog import data_dir

    (tmp_path / "config.json").write_text(
        (data_dir("model_specs") / "configs" / "Qwen--Qwen2.5-0.5B-Instruct.json").read_text())
    monkeypatch.chdir(tmp_path)
    code, data, err = _plan_json(capsys, ref, "--gpu", "rtx-4090")
    assert code == 0, err
    assert data["command"].split()[2] == str(tmp_path)


# ------------------------------------------- 2: a device smaller than the weights, any engine


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi"])
@pytest.mark.parametrize("gib", ["0.5", "2"])
def test_tiny_device_is_a_clean_does_not_fit_naming_the_weights(capsys, engine, gib):
    code, data, err = _plan_json(capsys, "llama-3.2-1b", "--gpu", "h100", "--gpu-memory-gib", gib,
                                 "--engine", engine)
    assert code == 1, err
    assert "internal error" not in err and "Traceback" not in err
    codes = {p["code"]: p["message"] for p in data["problems"]}
    assert "weights-exceed-device" in codes and "GiB per GPU" in codes["weights-exceed-device"]
    # no impossible value leaks into the serve line from an internal search
    for tok in data["command"].split():
        assert not (tok.startswith("-") and tok[1:2].isdigit()), data["command"]
    r = data["recommendations"]["gpu_memory_utilization"]["value"]
    assert r is None or 0 < r <= 1


# ------------------------------------------------ 3: the user's flags stay in the serve line


def test_given_max_model_len_is_kept_when_raising_utilization_fits(capsys):
    code, data, _ = _plan_json(capsys, "gpt-oss-120b", "--gpu", "h100", "--max-model-len", "131072")
    assert code == 1  # as configured (default utilization) it does not fit
    assert "--max-model-len 131072" in data["command"]
    assert "--gpu-memory-utilization 0.95" in data["command"]
    steps = next(p for p in data["problems"] if p["code"] == "next-steps")["message"]
    # alternatives in order of cost
    order = [steps.index(s) for s in ("--gpu-memory-utilization", "--kv-cache-dtype fp8",
                                      "--tensor-parallel-size 2")]
    assert order == sorted(order)


def test_unmet_target_is_an_error_and_never_suggests_a_length_below_the_request(capsys):
    code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "32768",
                               "--target-concurrency", "64", "--avg-input-tokens", "8000",
                               "--avg-output-tokens", "1000")
    assert code == 1 and data["fits"] is False
    msg = next(p for p in data["problems"] if p["code"] == "target-not-met")["message"]
    import re

    for length in re.findall(r"--max-model-len (\d+)", msg + data["command"]):
        assert int(length) >= 9000
    assert "--max-model-len 32768" in data["command"]


# ------------------------------------------- 4: keep the engine's default utilization


def test_target_that_fits_keeps_the_default_utilization(capsys):
    args = ["llama-3.1-70b", "--gpu", "h100", "-tp", "4", "--target-concurrency", "16",
            "--avg-input-tokens", "2000", "--avg-output-tokens", "500"]
    code, data, _ = _plan_json(capsys, *args)
    assert code == 0
    rec = data["recommendations"]["gpu_memory_utilization"]
    assert rec["value"] == 0.92 and "--gpu-memory-utilization 0.92" in data["command"]
    code, data, _ = _plan_json(capsys, *args, "--minimize-utilization")
    small = data["recommendations"]["gpu_memory_utilization"]
    assert code == 0 and small["value"] < 0.92 and f"{small['value']:g}" in small["reason"]
    # the batch size is sized at the fraction shown next to it
    assert f"{small['value']:g}" in data["recommendations"]["max_num_seqs"]["reason"]


# ------------------------------------------- 13: no internal provenance text in shipped data


def test_no_internal_provenance_text_in_data():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for folder in ("model_specs", "gpu_specs", "benchmarks/data"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and path.suffix in {".json", ".csv", ".md"}:
                text = path.read_text(errors="replace").lower()
                for leak in (
                    "search-index",
                    "index search",
                    "in this workplace",
                    "reference hf_configs",
                    "reference gpus.md",
                ):
                    assert leak not in text, f"{path}: {leak}"


# ------------------------------------------------------------ 5: predictable aliases


@pytest.mark.parametrize(
    "ref,want",
    [
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B"),
        ("llama3.1-8b", "meta-llama/Llama-3.1-8B"),
        ("Llama3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("llama3.1-70b", "meta-llama/Llama-3.1-70B"),
        ("llama-3.1-70b-instruct", "meta-llama/Llama-3.1-70B-Instruct"),
        ("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"),
        ("llama-2-7b-chat", "meta-llama/Llama-2-7b-chat-hf"),
    ],
)
def test_aliases_follow_the_documented_rule(ref, want):
    from kvplan.sources.catalog import find_model_entry

    assert find_model_entry(ref).id == want


def test_no_alias_without_a_variant_word_names_a_tuned_model_that_has_a_base():
    """The rule: an alias without instruct/it/chat names the base model when there is one."""
    import re

    from kvplan.sources.catalog import _model_key, model_entries

    names = {_model_key(e.id.split("/")[1]): e.id for e in model_entries()}
    variant = re.compile(r"(instruct|chat|-it\b|thinking)", re.IGNORECASE)
    for e in model_entries():
        for a in e.aliases:
            owner = names.get(_model_key(a.split("/")[-1]))
            assert owner in (None, e.id) or "/" in a, f"{a} of {e.id} is {owner}'s repo name"
            if variant.search(e.id) and not variant.search(a) and "/" not in a:
                stem = _model_key(variant.sub("", e.id.split("/")[1]))
                assert not any(_model_key(variant.sub("", o.split("/")[1])) == stem
                               and not variant.search(o) for o in names.values()), (a, e.id)


# ------------------------------------------------------------ 7: GPU suggestions


def test_unknown_gpu_suggests_prefix_matches_first(capsys):
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "v100")
    assert code == 2
    hint = err.split("hint:", 1)[1]  # a family name: exactly its variants (issue #21 item 11)
    assert "v100-sxm2-16gb" in hint and "v100-sxm2-32gb" in hint and "h100" not in hint


# ------------------------------------------- 12: typo'd repo ids suggest catalogue ids


def test_typod_repo_id_offline_is_bad_input_with_suggestion(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "kv"))
    code, _, err = run(
        capsys, "plan", "meta-llama/Llama-3.1-8B-Instrcut", "--gpu", "h100", "--offline"
    )
    assert code == 2 and "meta-llama/Llama-3.1-8B-Instruct" in err


@pytest.mark.parametrize("ref", ["Qwen/Qwen2.5-Coder-7B-Instruct", "google/gemma-3-4b-pt",
                                 "Qwen/Qwen2.5-14B-Instruct"])
def test_real_repo_id_offline_is_a_cache_miss_naming_close_ids_second(capsys, monkeypatch,
                                                                      tmp_path, ref):
    """A real Hub repo near a catalogue id (a word added, a size or variant changed, another
    variant) offline was "unknown model … not a local path", exit 2, without the offline hint."""
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "kv"))
    code, out, err = run(capsys, "plan", ref, "--gpu", "h100", "--json")
    assert code == 3, err
    error = json.loads(out)["error"]
    assert error["code"] == "offline-miss" and error["exit_code"] == 3
    first, second = error["hint"].split("\n")
    assert "unset HF_HUB_OFFLINE" in first and second.startswith("did you mean '")
    assert "unknown model" not in err
    assert "\n  hint: run the same command once online" in err
    assert "\n  did you mean '" in err  # the second line, under the first


def test_typod_repo_id_unreachable_hub_exit_3_names_catalogue_id(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "kv"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    code, _, err = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instrcut", "--gpu", "h100")
    assert code == 3 and "did you mean 'meta-llama/Llama-3.1-8B-Instruct'" in err


# ------------------------------------------------------------ 6: GPU capability


def _codes(data):
    return {p["code"]: p["severity"] for p in data["problems"]}


def test_bf16_checkpoint_on_v100_falls_back_to_float16_with_a_warning(capsys):
    code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "v100-sxm2-32gb",
                               "--max-model-len", "8192")
    assert code == 0 and data["model"]["dtype"] == "float16"
    assert _codes(data)["dtype-fallback"] == "warning"


def test_gemma2_on_t4_falls_back_to_float32_as_vllm_does(capsys):
    _, data, _ = _plan_json(capsys, "gemma-2-9b", "--gpu", "t4")
    assert data["model"]["dtype"] == "float32"


@pytest.mark.parametrize("flags", [["--dtype", "bfloat16"], ["-q", "fp8"]])
def test_what_a_v100_refuses_does_not_fit(capsys, flags):
    code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "v100-sxm2-32gb",
                               "--max-model-len", "8192", *flags)
    assert code == 1 and _codes(data)["gpu-capability"] == "error"


def test_fp8_kv_cache_below_cc_8_9_and_fp8_weights_on_ampere_are_warned(capsys):
    code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "v100-sxm2-32gb",
                               "--max-model-len", "8192", "--kv-cache-dtype", "fp8")
    assert code == 0 and _codes(data)["fp8-kv-emulated"] == "warning"
    code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "a100-80gb", "-q", "fp8")
    assert code == 0 and _codes(data)["fp8-weight-only"] == "warning"
    code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "h100", "-q", "fp8",
                               "--kv-cache-dtype", "fp8")
    assert not {"fp8-weight-only", "fp8-kv-emulated", "gpu-capability"} & set(_codes(data))


# ------------------------------------------- 10: block sizes and human-readable integers


def test_block_size_outside_vllms_choices_is_refused(capsys):
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "h100", "--block-size", "7")
    assert code == 2 and "--block-size 7" in err and "16" in err
    code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "h100", "--block-size", "32")
    assert code == 0 and "--block-size 32" in data["command"]


@pytest.mark.parametrize("text,value", [("32k", 32000), ("32K", 32768), ("8192", 8192)])
def test_plan_reads_human_readable_lengths_as_vllm_and_check_do(capsys, text, value):
    code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "h100", "--max-model-len", text)
    assert code == 0 and data["inputs"]["max_model_len"]["value"] == value


def test_plan_refuses_a_malformed_length_as_usage_error(capsys):
    code, _, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "32x")
    assert code == 2 and "32k" in err and "internal error" not in err


# ------------------------------------------------------------ 14: compare


def test_compare_validates_workload_flags(capsys):
    code, _, err = run(
        capsys, "compare", "llama-3.1-8b", "--gpu", "h100", "--target-concurrency", "0"
    )
    assert code == 2 and "--target-concurrency" in err and "internal error" not in err


def test_compare_says_when_engines_run_at_different_tp(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    _code, out, _ = run(capsys, "compare", "llama-3.1-70b", "--gpu", "h100")
    assert "GPUs (TP × PP × DP)" in out
    assert "different tensor_parallel_size" in out
    _code, out, _ = run(capsys, "compare", "llama-3.1-70b", "--gpu", "h100", "-tp", "4")
    assert "different tensor_parallel_size" not in out


# ------------------------------------------------------------ 9: policy files and help text


def test_kvplan_toml_accepts_the_tool_kvplan_snippet(tmp_path):
    from kvplan.deploy.check import load_policy

    (tmp_path / "kvplan.toml").write_text("[tool.kvplan]\nmin_concurrency = 4\ngpu = 'h100'\n")
    policy, where = load_policy(None, tmp_path)
    assert policy.min_concurrency == 4 and policy.gpu == "h100" and where.endswith("kvplan.toml")
    (tmp_path / "kvplan.toml").write_text("min_concurrency = 2\n")
    assert load_policy(None, tmp_path)[0].min_concurrency == 2


def test_every_option_help_survives_rich_markup(capsys, monkeypatch):
    """Brackets in help text ([tool.kvplan]) must not be eaten as rich markup."""
    import re

    from kvplan.cli import click_app

    monkeypatch.setenv("COLUMNS", "400")
    group = click_app()

    def norm(t: str) -> str:
        return re.sub(r"[\s│]+", "", t)  # wrapping may split anywhere

    for name, cmd in group.commands.items():
        _code, out, _ = run(capsys, name, "--help")
        for param in cmd.params:
            help_text = getattr(param, "help", None)
            if help_text:
                assert norm(help_text.replace("\\[", "[")) in norm(out), (name, help_text)


# ------------------------------------- 8, 11, 15: check reports what the engine would refuse


def _check(capsys, tmp_path, text, name="serve.sh", *extra):
    path = tmp_path / name
    path.write_text(text)
    code, out, _err = run(capsys, "check", str(path), "--gpu", "h100", "--json", *extra)
    return code, json.loads(out)


def test_unknown_engine_flags_are_errors_with_did_you_mean(capsys, tmp_path):
    code, report = _check(capsys, tmp_path, "vllm serve meta-llama/Llama-3.1-8B-Instruct "
                          "--max-model-length 65536 --gpu-memory-utilisation 0.99\n")
    d = report["deployments"][0]
    msgs = [p["message"] for p in d["problems"] if p["code"] == "unknown-flag"]
    assert code == 2 and d["status"] == "error"
    assert any("did you mean --max-model-len" in m for m in msgs)
    assert any("did you mean --gpu-memory-utilization" in m for m in msgs)


def test_valid_unmodelled_flags_are_kept(capsys, tmp_path):
    code, report = _check(capsys, tmp_path, "vllm serve meta-llama/Llama-3.1-8B-Instruct "
                          "--port 8000 --served-model-name x --no-enable-log-requests "
                          "--compilation-config.level=3 -O3 --swap-space 4 --max-model-len 8192\n")
    assert code == 0, report["deployments"][0]["problems"]


@pytest.mark.parametrize("line,engine", [
    ("python -m vllm.entrypoints.api_server --model meta-llama/Llama-2-7b-chat-hf", "vllm"),
    ("python3 -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-2-7b-chat-hf", "vllm"),
    ("vllm serve meta-llama/Llama-2-7b-chat-hf", "vllm"),
    ("python3 -m sglang.launch_server --model-path meta-llama/Llama-2-7b-chat-hf", "sglang"),
    ("sglang serve meta-llama/Llama-2-7b-chat-hf --port 30000", "sglang"),
    ("text-generation-launcher --model-id meta-llama/Llama-2-7b-chat-hf -p 8080", "tgi"),
])
def test_every_entry_point_is_recognised(capsys, tmp_path, line, engine):
    code, report = _check(capsys, tmp_path, line + "\n")
    d = report["deployments"][0]
    assert d["engine"] == engine and d["model"] == "meta-llama/Llama-2-7b-chat-hf", d
    assert code == 0, d["problems"]


def test_legacy_api_server_reports_every_refusal_with_specific_codes(capsys, tmp_path):
    code, report = _check(capsys, tmp_path, "python -m vllm.entrypoints.api_server --model "
                          "meta-llama/Llama-2-7b-chat-hf --tensor-parallel-size 1 "
                          "--gpu-memory-utilization 0.9 --max-model-len 8192 --quantization awq\n")
    codes = {p["code"] for p in report["deployments"][0]["problems"]}
    assert code == 2
    assert {"max-model-len-above-model-maximum", "quantization-mismatch"} <= codes
    assert "error" not in codes


def test_check_table_counts_the_problems_it_prints(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "serve.sh"
    path.write_text("vllm serve meta-llama/Llama-3.1-70B-Instruct --port 8000\n")
    _code, out, _ = run(capsys, "check", str(path), "--gpu", "h100")
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("where"))
    row = lines[header + 1].split()
    printed = [line for line in lines[header + 2:] if line.startswith(f"{path}:1 ")]
    assert row[3] == str(len(printed)) and printed


# ------------------------------------------- tables at 80 columns, in pipes, and as TSV


def _render80(fn, *args, **kw):
    import io

    from rich.console import Console

    buf = io.StringIO()
    fn(*args, Console(width=80, file=buf, highlight=False), **kw)
    return buf.getvalue()


def _model_rows():
    from kvplan.model.weights import parameter_count
    from kvplan.sources.catalog import load_catalog_model, model_entries

    return [(e, m, parameter_count(m), 1) for e in model_entries() for m in [load_catalog_model(e)]]


def test_models_table_at_80_columns_keeps_every_id_whole():
    from kvplan.render.text import models_table

    rows = _model_rows()
    out = _render80(models_table, rows)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    for e, *_ in rows:
        assert any(line.split()[0] == e.id for line in lines[1:] if line.strip()), e.id


def test_gpus_table_at_80_columns_keeps_every_id_whole():
    from kvplan.render.text import gpus_table
    from kvplan.sources.catalog import gpu_specs

    out = _render80(gpus_table, list(gpu_specs()))
    firsts = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert all(len(line) <= 80 for line in out.splitlines())
    assert {g.id for g in gpu_specs()} <= firsts


def test_check_and_compare_tables_at_80_columns(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _code, out, _ = run(capsys, "compare", "llama-3.1-8b", "--gpu", "h100")
    table = out.split("\n\n")[0].splitlines()
    assert all(len(line) <= 80 for line in table) and "131,072" in out
    monkeypatch.chdir(tmp_path)  # a short path leaves room for the long model id, whole
    Path("s.sh").write_text("vllm serve RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic "
                            "-tp 4\n")
    _code, out, _ = run(capsys, "check", "s.sh", "--gpu", "h100")
    lines = out.splitlines()
    row = lines[next(i for i, line in enumerate(lines) if line.startswith("where")) + 1]
    assert "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic" in row.split()


def test_check_table_and_its_note_fit_80_columns_in_a_pipe(capsys, tmp_path, monkeypatch):
    """A path and a model id that fit 80 columns apart but not together (with the status, the
    header was 89 columns, and so was the "not shown" line): the model gives way and is named,
    and every line on stdout and stderr fits 80 columns."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(tmp_path)
    path = Path("deploy/production/us-east-1/llama-8b-serve.sh")
    path.parent.mkdir(parents=True)
    path.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n")
    code, out, err = run(capsys, "check", str(path), "--gpu", "h100")
    assert code == 0, err
    assert [line for line in (out + err).splitlines() if len(line) > 80] == []
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("where"))
    assert lines[header].split()[:2] == ["where", "status"]
    assert lines[header + 1].split()[:2] == [f"{path}:1", "fits"]
    note = " ".join(err.split())
    assert "(not shown at 80 columns: model, " in note and "--json has every column)" in note


@pytest.mark.parametrize(("command", "hidden"), [
    ("models", "max len, weights, family, aliases, attention"),
    ("gpus", "name, nvidia-smi, aliases")])
def test_models_and_gpus_not_shown_note_fits_80_columns_in_a_pipe(capsys, monkeypatch, command,
                                                                  hidden):
    """`kvplan models | cat` and `kvplan gpus | cat` at 80 columns: their "not shown" notes (102
    and 83 characters on one line) are wrapped at the console's width like check's, by the one
    table printer the three share (render/text.py _print_table)."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run(capsys, command)
    assert code == 0, err
    assert [line for line in (out + err).splitlines() if len(line) > 80] == []
    assert len(err.splitlines()) == 2
    assert " ".join(err.split()) == (f"(not shown at 80 columns: {hidden}; --format tsv has "
                                     "every column)")


def test_models_tsv_has_every_column_and_grep_finds_whole_ids(capsys):
    code, out, _ = run(capsys, "models", "--format", "tsv")
    lines = out.splitlines()
    assert code == 0 and lines[0].split("\t")[:2] == ["id", "params"] and "aliases" in lines[0]
    assert any(line.startswith("Qwen/Qwen3-8B\t") for line in lines)
    code, out, _ = run(capsys, "models", "qwen")
    # every row names a Qwen model (Qwen/…, or a re-publisher's such as nvidia/Qwen3-…-NVFP4)
    assert all("qwen" in line.split()[0].lower() for line in out.splitlines()[1:] if line.strip())


def test_plan_help_at_80_columns_shows_whole_option_names(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _, out, _ = run(capsys, "plan", "--help")
    for name in ("--tensor-parallel-size", "--gpu-memory-utilization", "--max-num-batched-tokens",
                 "--disable-hybrid-kv-cache-manager", "--minimize-utilization"):
        assert name in out


# ------------------------------------------------------------ 13: small things


def test_models_filter_matching_nothing_is_bad_input(capsys):
    code, out, err = run(capsys, "models", "nonexistent")
    assert code == 2 and out == "" and "no catalogue model matches 'nonexistent'" in err
    code, out, err = run(capsys, "gpus", "v99")
    assert code == 2 and "no catalogue gpu matches" in err


def test_show_is_readable_and_has_json(capsys):
    code, out, _ = run(capsys, "models", "show", "llama-3.1-8b")
    assert code == 0 and "{" not in out and "aliases" in out and "meta-llama/Llama-3.1-8B" in out
    code, out, _ = run(capsys, "models", "show", "llama-3.1-8b", "--json")
    assert json.loads(out)["entry"]["id"] == "meta-llama/Llama-3.1-8B"
    code, out, _ = run(capsys, "gpus", "show", "h200")
    assert code == 0 and "compute capability" in out and "{'" not in out
    code, out, _ = run(capsys, "gpus", "show", "h200", "--json")
    assert json.loads(out)["id"] == "h200-sxm-141gb"


def test_version(capsys):
    from kvplan import __version__

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"kvplan {__version__}"


def test_concurrency_is_formatted_alike_everywhere(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "s.sh"
    path.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n")
    _, out, _ = run(capsys, "check", str(path), "--gpu", "h100")
    import re

    assert re.search(r"\b\d+\.\d\dx\b", out)
    _, out, _ = run(capsys, "check", str(path), "--gpu", "h100", "--format", "github")
    assert re.search(r"\d+\.\d\dx concurrency", out)


# ------------------------------- 3 (same class): a given --max-num-seqs is kept, every engine


@pytest.mark.parametrize(
    "engine,flag",
    [
        ("vllm", "--max-num-seqs"),
        ("sglang", "--max-running-requests"),
        ("tgi", "--max-concurrent-requests"),
    ],
)
def test_given_max_num_seqs_is_kept_in_the_serve_line(capsys, engine, flag):
    _code, data, _ = _plan_json(capsys, "llama-3.1-8b", "--gpu", "h100", "--max-num-seqs", "64",
                               "--max-model-len", "8192", "--engine", engine)
    assert f"{flag} 64" in data["command"]
    rec = data["recommendations"]["max_num_seqs"]
    assert rec["value"] == 64 and "preempted" in rec["reason"]


def test_no_plan_recommends_an_out_of_range_fraction_anywhere():
    """The item-2 class over the catalogue: no engine, GPU or tiny device leaks an internal
    search value (a negative or >1 fraction) into a recommendation or a serve line."""
    from kvplan.api import plan
    from kvplan.errors import KvplanError
    from kvplan.sources.catalog import load_catalog_model, model_entries, resolve_gpu

    gpus = [resolve_gpu(g) for g in ("h100", "t4")]
    for e in list(model_entries())[::3]:
        m = load_catalog_model(e)
        for g in gpus:
            for engine in ("vllm", "sglang", "tgi"):
                try:
                    p = plan(m, g, engine=engine, gpu_memory_gib=0.5)
                except KvplanError:
                    continue
                r = p.recommendations.gpu_memory_utilization.value
                assert r is None or 0 < r <= 1, (e.id, g.id, engine, r)
                assert not any(t.startswith("-") and t[1:2].isdigit() for t in p.command.split())


def test_weights_exceed_device_names_the_gpus_expert_parallelism_splits_them_over(capsys):
    """DeepSeek-V3 (671B, fp8 checkpoint) with --enable-expert-parallel -dp 2 on H100: TP 1, but
    the experts are split over the 2 DP ranks, so the message says 2 GPUs (it said "1 GPU").
    Per GPU, the weights are more than half the checkpoint (the dense part is on both ranks)
    and less than all of it: 671e9 parameters at 1 byte ≈ 625 GiB."""
    code, data, err = _plan_json(capsys, "deepseek-ai/DeepSeek-V3", "--gpu", "h100",
                                 "--enable-expert-parallel", "-dp", "2")
    assert code == 1, err
    msg = {p["code"]: p["message"] for p in data["problems"]}["weights-exceed-device"]
    assert "split over 2 GPUs" in msg
    per_gpu = float(msg.split("need ")[1].split(" GiB")[0])
    assert 625 / 2 < per_gpu < 625


def test_check_table_keeps_its_status_column_beside_a_long_path(capsys, tmp_path, monkeypatch):
    """A path wider than the console: the required columns (where, status) overflow whole
    instead of the status being dropped (rich caps a print's width at the console's); the
    model gives way, named on stderr."""
    monkeypatch.setenv("COLUMNS", "80")
    deep = tmp_path / ("a_rather_long_directory_name_for_deployments_" * 2) / "serve.sh"
    deep.parent.mkdir()
    deep.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n")
    code, out, err = run(capsys, "check", str(deep), "--gpu", "h100")
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("where"))
    assert code == 0 and header.split() == ["where", "status"], out
    row = next(line for line in lines if line.startswith(f"{deep}:1"))
    assert row.split()[1:] == ["fits"]
    assert "not shown at 80 columns: model," in " ".join(err.split())


def test_check_table_names_its_own_every_column_option():
    """The dropped-columns hint names an option `check` has (--json; it takes no --format)."""
    import io

    from rich.console import Console

    from kvplan.render.text import _print_table

    buf = io.StringIO()
    console = Console(width=30, file=buf, force_terminal=True, color_system=None)
    _print_table(console, [("where", ["x.sh:1"], "left"), ("model", ["m" * 20], "left"),
                           ("GPU", ["1 × h100-sxm-80gb"], "left")], tsv=False,
                 every_column="--json")
    assert "GPU; --json has every column" in " ".join(buf.getvalue().split())


def test_report_on_a_file_whose_models_are_unavailable_exits_3(capsys, tmp_path, monkeypatch):
    """Offline, the file's model is not cached: exit 3 (a source is unavailable), as check and
    plan say for the same cause (report said 2 before 2026-12-03)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "serve.sh"
    path.write_text("vllm serve example-org/not-cached-model --max-model-len 8192\n")
    code, _, err = run(capsys, "report", str(path), "--gpu", "h100")
    assert code == 3 and "nothing to plan" in err
    code, _, _ = run(capsys, "check", str(path), "--gpu", "h100")
    assert code == 3


def test_check_reads_standard_input_once(capsys, tmp_path, monkeypatch):
    # `-` is standard input (tests/deploy/test_check_reading.py); naming it twice is refused
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "check", "-", "-", "--gpu", "h100")
    assert code == 2 and "can be read once" in err


def test_an_unknown_gpu_hint_names_steps_that_work(capsys):
    code, _, err = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "zzqq9")
    assert code == 2 and "kvplan gpus" in err and "--gpu local" in " ".join(err.split())


@pytest.mark.parametrize("args, hint", [
    (["--kv-cache-dtype", "fp4"], "use auto, bfloat16, fp8"),
    (["--max-model-len", "10m"], "use --max-model-len 131072 or less"),
    (["--gpus", "gaudi2"], "plan that GPU alone with `kvplan plan … --gpu-memory-gib N`"),
])
def test_sweep_keeps_the_refusals_hint_when_nothing_can_be_planned(capsys, args, hint):
    gpus = [] if "--gpus" in args else ["--gpus", "h100"]
    code, out, _ = run(capsys, "sweep", "meta-llama/Llama-3.1-8B-Instruct", *gpus, *args,
                       "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["message"].startswith("no candidate can be planned")
    assert hint in (error["hint"] or "")


def test_a_catalogue_alias_with_a_revision_asks_the_hub_for_its_repo(capsys, monkeypatch):
    """`llama-3.1-8b-instruct --revision main`: that revision of meta-llama/Llama-3.1-8B-Instruct
    (offline and not cached: exit 3), not an unknown model (exit 2, before 2026-12-03)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run(capsys, "plan", "llama-3.1-8b-instruct", "--gpu", "h100", "--revision",
                       "main")
    assert code == 3 and "meta-llama/Llama-3.1-8B-Instruct (revision main)" in err


def test_a_missing_or_empty_prices_file_is_named(capsys, tmp_path):
    code, _, err = run(capsys, "sweep", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "h100",
                       "--prices", str(tmp_path / "nope.csv"))
    assert code == 2 and "cannot read the --prices file" in err
    empty = tmp_path / "empty.csv"
    empty.write_text("id,usd_per_hour\n")
    code, _, err = run(capsys, "sweep", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "h100",
                       "--prices", str(empty))
    assert code == 2 and "no price rows after the header" in err


def test_compare_has_no_acceptance_rate_it_could_not_use(capsys):
    """compare plans no draft model (no --speculative-config), so it does not take the rate."""
    code, _, err = run(capsys, "compare", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                       "--acceptance-rate", "0.5")
    assert code == 2 and "No such option: --acceptance-rate" in err


def test_plan_text_states_the_fit_distance_and_a_missing_price(capsys, monkeypatch):
    """'calibrated' names the architecture × engine; the text also says how far the release is
    from the fitted one (the JSON's performance.calibration), and a GPU without a bundled price
    keeps its cost line with the flag that sets one."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "plan", "Qwen/Qwen3-8B", "--gpu", "l4", "--max-model-len", "8k")
    text = " ".join(out.split())
    assert code == 0 and "coefficients: " in text and "fitted on 0.12" in text
    assert "no default price: pass --gpu-hour-price" in text


def test_sweep_says_why_it_has_no_latency_figures(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "sweep", "meta-llama/Llama-3.1-405B", "--gpus", "l4",
                       "--max-gpus", "1", "--target-concurrency", "8")
    assert "no latency figures (no option fits" in " ".join(out.split())


def test_sweep_marks_tensorrt_llm_ttft_as_borrowed(capsys, monkeypatch):
    """TensorRT-LLM's own fit covers TPOT and throughput on Hopper; its TTFT terms are vLLM's:
    the sweep's fit cell says part, not cal."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "sweep", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "h100",
                       "--engine", "trtllm", "--max-gpus", "1", "--target-concurrency", "8",
                       "--kv-cache-dtype", "auto")
    rows = [line.split() for line in out.splitlines() if line.startswith("1 ")]
    assert code == 0 and rows and "part" in rows[0]
    assert "part = its TTFT terms borrowed from another engine" in " ".join(out.split())


def test_disagg_refuses_the_rate_flags_it_does_not_model(capsys, tmp_path):
    """--disagg plans a closed loop: a request rate, percentile or traffic file was dropped
    silently before 2026-12-03 (even a missing file went unreported)."""
    code, _, err = run(capsys, "plan", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "h100",
                       "--disagg", "--avg-input-tokens", "3000", "--avg-output-tokens", "300",
                       "--request-rate", "10", "--slo-percentile", "99", "--traffic",
                       str(tmp_path / "missing.csv"))
    flat = " ".join(err.split())
    assert code == 2 and "--request-rate, --slo-percentile, --traffic: not modelled" in flat


def test_disagg_missing_its_ttft_target_exits_1(capsys):
    code, out, _ = run(capsys, "plan", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "h100",
                       "--disagg", "--avg-input-tokens", "3000", "--avg-output-tokens", "300",
                       "--slo-ttft-ms", "50", "--json")
    data = json.loads(out)
    assert code == 1 and data["fits"] is False
    assert any(p["code"] == "disagg-slo-unmet" and p["severity"] == "error"
               for p in data["problems"])


def test_a_workload_longer_than_the_context_is_not_served(capsys):
    """Mean requests of 3,000 + 100 tokens against --max-model-len 2048: every engine rejects
    them, so the plan says so and exits 1 (it printed FITS with full figures before)."""
    for engine in ("vllm", "sglang"):
        code, out, _ = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                           "--engine", engine, "--max-model-len", "2048", "--avg-input-tokens",
                           "3000", "--avg-output-tokens", "100", "--json")
        data = json.loads(out)
        bad = [p for p in data["problems"] if p["code"] == "workload-longer-than-context"]
        assert code == 1 and bad and bad[0]["severity"] == "error", engine
        assert "needs 3,100 tokens of context" in bad[0]["message"]
    code, _, _ = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                     "--max-model-len", "4096", "--avg-input-tokens", "3000",
                     "--avg-output-tokens", "100")
    assert code == 0


def test_a_given_length_stays_in_the_serve_line_of_a_plan_that_does_not_fit(capsys):
    """Respect what the user asked: --max-model-len 32k stays in the line of a plan where no
    length fits (the problems say why); it was dropped silently before 2026-12-03."""
    code, out, _ = run(capsys, "plan", "meta-llama/Llama-3.1-405B", "--gpu", "h100",
                       "--max-model-len", "32k", "--json")
    d = json.loads(out)
    assert code == 1 and "--max-model-len 32000" in d["command"]
    assert d["recommendations"]["max_model_len"]["reason"].startswith("as given; no length fits")


def test_sweep_names_each_refusal_with_its_gpus(capsys, monkeypatch):
    """Every distinct reason a candidate was not planned, with the GPUs it struck (gaudi2,
    asked for and planned on no engine, was named nowhere before 2026-12-03)."""
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "sweep", "Qwen/Qwen3-32B", "--gpus", "h100,gaudi2",
                       "--engine", "all", "--max-gpus", "2", "--target-concurrency", "8")
    text = " ".join(out.split())
    assert "gaudi2: unsupported: the device total of gaudi2 is unknown" in text
    assert "gaudi2: unsupported: TensorRT-LLM runs on NVIDIA GPUs only" in text


def test_a_plan_across_nodes_in_a_pipe_keeps_80_columns_but_its_launch_lines_whole(
        capsys, monkeypatch):
    """Prose wraps at 80 columns; launch lines stay one line each, to copy whole (the links
    line was once 168 columns wide)."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "plan", "meta-llama/Llama-3.1-405B", "--gpu", "h100",
                       "-tp", "8", "-pp", "2")
    lines = out.splitlines()
    assert code == 0 and any(line.startswith("links: ") for line in lines)
    launch = [line for line in lines if line.startswith("vllm serve ")]
    assert len(launch) == 3 and all("--pipeline-parallel-size 2" in x for x in launch)
    assert all(len(line) <= 80 for line in lines if line not in launch)


def test_columns_a_piped_table_drops_are_named_on_stderr(capsys, tmp_path, monkeypatch):
    """At 80 columns a long path leaves no room for check's problems, KV tokens, concurrency
    and GPU columns; on a terminal a dim line named them, in a pipe (a CI log) nothing did.
    Now stderr says so; stdout keeps only the table."""
    monkeypatch.setenv("COLUMNS", "80")
    deep = tmp_path / ("a-rather-long-directory-name-" * 2)
    deep.mkdir()
    path = deep / "serve.sh"
    path.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n")
    code, out, err = run(capsys, "check", str(path), "--gpu", "h100")
    assert code == 0 and "KV tokens" not in out
    note = " ".join(err.split())  # wrapped at 80 columns
    assert "not shown at 80 columns: model, problems, KV tokens" in note and "--json" in note
    assert "not shown" not in out


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_model_name_says_so(capsys, tmp_path, monkeypatch, name):
    """`kvplan plan '' --gpu h100` (an unset shell variable) said ".: no config.json in this
    directory": Path("") is the current directory. The name is refused as empty, exit 2."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "plan", name, "--gpu", "h100")
    assert code == 2 and not out
    assert err.startswith("Error: the model name is empty\n  hint: name a catalogue model")
    assert "config.json in this directory" not in err
    with pytest.raises(InvalidInputError, match="the model name is empty"):
        kvplan.plan(name, "h100")


def test_check_row_keeps_an_offline_miss_and_its_did_you_mean_on_one_line(capsys, monkeypatch,
                                                                         tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "kv"))
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve Qwen/Qwen2.5-Coder-7B-Instruct\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    assert code == 3
    [row] = json.loads(out)["deployments"]
    [problem] = row["problems"]
    assert "\n" not in problem["message"]
    assert "unset HF_HUB_OFFLINE" in problem["message"]
    assert "local model directory; did you mean 'Qwen/Qwen2.5-7B-Instruct'" in problem["message"]
