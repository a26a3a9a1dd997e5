"""Hostile input: every class of the reliability issue has its regression test here.

Each input must end quickly (bounded work) in an exit code 0-3 with a message naming the
file, field or flag — never "internal error", a hang or a traceback.
"""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import pytest
from clirun import run

LLAMA = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 1000,
         "intermediate_size": 512, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


def timed(capsys, *args, limit_s: float = 10.0):
    start = time.monotonic()
    code, out, err = run(capsys, *args)
    elapsed = time.monotonic() - start
    assert elapsed < limit_s, f"kvplan {' '.join(args)[:80]} took {elapsed:.1f} s"
    assert "internal error" not in err and "Traceback" not in err, err
    assert code in (0, 1, 2, 3)
    return code, out, err


def model_dir(tmp_path: Path, cfg: dict | None = None, name: str = "model") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg or LLAMA))
    return d


def safetensors(path: Path, header: dict, payload: int = 0) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * payload)


def check_report(capsys, *files, limit_s: float = 10.0, extra=()):
    code, out, err = timed(capsys, "check", *map(str, files), "--gpu", "h100", "--json", *extra,
                           limit_s=limit_s)
    return code, json.loads(out), err


def messages(report: dict) -> str:
    return "\n".join(p["message"] for d in report["deployments"] for p in d["problems"])


# ----------------------------------------------------- class 1: hangs, unbounded work


@pytest.mark.parametrize("version", ["0.1" + "a" * 30 + "!", "0." + "1" * 5000, "v" * 100_000])
def test_engine_version_parser_is_linear(capsys, version):
    code, _, err = timed(capsys, "plan", "qwen2.5-7b", "--gpu", "h100", "--engine-version", version,
                         limit_s=5)
    assert code == 2 and "--engine-version" in err


def test_engine_version_directive_is_linear(capsys, tmp_path):
    f = tmp_path / "run.sh"
    f.write_text("# kvplan: engine-version=0.1" + "a" * 30 + "!\nvllm serve qwen2.5-7b\n")
    code, report, _ = check_report(capsys, f, limit_s=5)
    assert code == 2 and "engine-version from # kvplan: comment at line 1" in messages(report)


def test_template_scan_is_linear(capsys, tmp_path):
    f = tmp_path / "run.sh"
    f.write_text("vllm serve x " + "{{ " * 10_000 + "${a:-" * 5_000 + "\n")
    code, _, _ = check_report(capsys, f, limit_s=5)
    assert code == 2


def test_yaml_alias_bomb_is_expanded_once(capsys, tmp_path):
    levels = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, cur in zip("abcdef", "bcdefg", strict=True):
        levels.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]")
    f = tmp_path / "bomb.yaml"
    f.write_text("\n".join(levels) + "\nspec:\n  affinity: *g\n  containers: *g\n")
    code, _, _ = check_report(capsys, f, limit_s=5)
    assert code == 2  # no serving command in it, found quickly


@pytest.mark.parametrize(
    "text",
    [
        "a: &a [*a]\n",
        "a: &a {b: *a}\nspec: {containers: [*a]}\n",
        "a: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "a:\n" + "".join(" " * (2 * i + 2) + f"k{i}:\n" for i in range(500)),
    ],
)
def test_recursive_and_deep_yaml(capsys, tmp_path, text):
    f = tmp_path / "x.yaml"
    f.write_text(text)
    code, report, _ = check_report(capsys, f, limit_s=5)
    assert code == 2 and "x.yaml" in json.dumps(report)


def test_huge_tensor_parallel_size_is_rejected_fast(capsys):
    code, _, err = timed(
        capsys, "plan", "qwen2.5-7b", "--gpu", "h100", "-tp", "1000000000", limit_s=5
    )
    assert code == 2 and "--tensor-parallel-size" in err


def test_layer_count_is_capped(capsys, tmp_path):
    d = model_dir(tmp_path, {**LLAMA, "num_hidden_layers": 100_000})
    code, _, err = timed(capsys, "plan", str(d), "--gpu", "h100", limit_s=5)
    assert code == 2 and "num_hidden_layers" in err and "config.json" in err


def test_many_tensors_plan_in_linear_time(capsys, tmp_path):
    d = model_dir(tmp_path)
    n = 100_000
    header = {f"model.layers.{i % 4}.mlp.experts.{i}.w.weight":
              {"dtype": "BF16", "shape": [8, 8], "data_offsets": [i * 128, (i + 1) * 128]}
              for i in range(n)}
    safetensors(d / "model.safetensors", header, payload=n * 128)
    code, _, _ = timed(capsys, "plan", str(d), "--gpu", "h100", "--json", limit_s=30)
    assert code in (0, 1)


def test_allocator_replays_many_small_tensors_fast():
    from kvplan.model.allocator import CachingAllocator

    a = CachingAllocator()
    start = time.monotonic()
    handles = [a.malloc(600) for _ in range(100_000)]
    for h in handles[::2]:
        a.free(h)
    for h in handles[1::2]:
        a.free(h)
    a.empty_cache()
    assert a.reserved_bytes == 0 and a.allocated_bytes == 0
    # a bound against a replay quadratic in the tensors (hours at 100,000), not a speed
    # measure: about 1 s on the 2-core host, which missed 5 s under a loaded CI run
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("args", [("plan", "/dev/zero"), ("plan", "/dev")])
def test_devices_are_not_read(capsys, args):
    code, _, err = timed(capsys, *args, "--gpu", "h100", limit_s=5)
    assert code == 2 and "/dev" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_fifos_do_not_hang(capsys, tmp_path, name):
    d = model_dir(tmp_path)
    (d / name).unlink(missing_ok=True)
    os.mkfifo(d / name)
    code, _, err = timed(capsys, "plan", str(d), "--gpu", "h100", limit_s=5)
    assert code == 2 and name in err and "regular file" in err


def test_fifo_deployment_file(capsys, tmp_path):
    f = tmp_path / "deploy.yaml"
    os.mkfifo(f)
    code, report, _ = check_report(capsys, f, limit_s=5)
    assert code == 2 and "regular file" in messages(report)


@pytest.mark.parametrize("name,size", [("big.yaml", 5 * 2**20), ("run.sh", 6 * 2**20)])
def test_oversized_deployment_files(capsys, tmp_path, name, size):
    f = tmp_path / name
    f.write_text(
        ("a: b\n" * (size // 5)) if name.endswith(".yaml") else "vllm serve x " + "y" * size
    )
    code, report, _ = check_report(capsys, f, limit_s=5)
    assert code == 2 and "limit" in messages(report)


def test_long_shell_line_under_the_file_limit(capsys, tmp_path):
    f = tmp_path / "run.sh"
    f.write_text("vllm serve x " + "\\\n--y z " * 100_000 + "\n")
    code, report, _ = check_report(capsys, f, limit_s=5)
    assert code == 2 and "characters" in messages(report)


def test_too_many_commands_in_one_file(capsys, tmp_path):
    f = tmp_path / "run.sh"
    f.write_text("vllm serve qwen2.5-7b\n" * 1000)
    code, report, _ = check_report(capsys, f, limit_s=10)
    assert code == 2 and "serving commands" in messages(report)


# ------------------------------------------- class 2: reads outside the model directory

SECRET = b"hf_SECRETTOKENVALUE1234567890"


def _leaks(text: str) -> bool:
    number = str(struct.unpack("<Q", SECRET[:8])[0])
    return number in text or "SECRE" in text or "hf_" in text


@pytest.mark.parametrize("entry", ["ABSOLUTE", "../secret/token", "sub/../../secret/token"])
def test_shard_index_cannot_name_files_outside(capsys, tmp_path, monkeypatch, entry):
    secret = tmp_path / "secret" / "token"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    d = model_dir(tmp_path)
    name = str(secret) if entry == "ABSOLUTE" else entry
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": name}}))
    for fmt in ("table", "github"):
        f = tmp_path / "run.sh"
        f.write_text(f"vllm serve {d.name}\n")
        monkeypatch.chdir(tmp_path)
        code, out, err = timed(capsys, "check", str(f), "--gpu", "h100", "--format", fmt)
        assert code == 2 and not _leaks(out + err)
        assert "weight_map" in out + err
    code, out, err = timed(capsys, "plan", str(d), "--gpu", "h100")
    assert code == 2 and not _leaks(out + err) and "index" in err


def test_symlinked_shard_pointing_outside_is_refused(capsys, tmp_path):
    secret = tmp_path / "token"
    secret.write_bytes(SECRET)
    d = model_dir(tmp_path)
    (d / "model.safetensors").symlink_to(secret)
    code, out, err = timed(capsys, "plan", str(d), "--gpu", "h100")
    assert code == 2 and "outside the model directory" in err and not _leaks(out + err)


def test_symlinked_config_pointing_outside_is_refused(capsys, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({**LLAMA, "model_type": "hf_SECRET"}))
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").symlink_to(outside)
    code, out, err = timed(capsys, "plan", str(d), "--gpu", "h100")
    assert code == 2 and "outside the model directory" in err and not _leaks(out + err)


def test_corrupt_header_never_echoes_its_bytes(capsys, tmp_path):
    d = model_dir(tmp_path)
    (d / "model.safetensors").write_bytes(SECRET)
    code, out, err = timed(capsys, "plan", str(d), "--gpu", "h100")
    assert code == 2 and "model.safetensors" in err and not _leaks(out + err)


def test_hf_cache_snapshot_symlinks_to_blobs_are_followed(capsys, tmp_path):
    repo = tmp_path / "models--org--m"
    blobs, snap = repo / "blobs", repo / "snapshots" / "abc123"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (blobs / "cfg").write_text(json.dumps(LLAMA))
    (snap / "config.json").symlink_to("../../blobs/cfg")
    code, _, err = timed(capsys, "plan", str(snap), "--gpu", "h100")
    assert code == 0, err


def test_check_does_not_read_model_paths_outside_the_repo(capsys, tmp_path, monkeypatch):
    outside = model_dir(tmp_path, {**LLAMA, "model_type": "hf_SECRET"}, name="outside")
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo)
    for ref in (str(outside), "../outside", "~/outside"):
        (repo / "run.sh").write_text(f"vllm serve {ref}\n")
        code, out, err = timed(capsys, "check", "run.sh", "--gpu", "h100", "--format", "github")
        assert code == 2 and not _leaks(out + err) and "outside" in out


def test_check_does_not_follow_a_deployment_symlink_out(capsys, tmp_path, monkeypatch):
    secret = tmp_path / "token"
    secret.write_bytes(b"vllm serve " + SECRET + b"\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "deploy.sh").symlink_to(secret)
    monkeypatch.chdir(repo)
    code, out, err = timed(capsys, "check", "deploy.sh", "--gpu", "h100", "--format", "github")
    assert code == 2 and "symlink" in out and not _leaks(out + err)


# ------------------------------------------------------ class 4: config validation

CONFIGS = Path(__file__).resolve().parents[2] / "model_specs" / "configs"


def _mutated(name: str, path: tuple[str, ...], value) -> dict:
    cfg = json.loads((CONFIGS / name).read_text())
    node = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return cfg


@pytest.mark.parametrize("name,path,value", [
    ("Qwen--Qwen2.5-7B-Instruct.json", ("num_attention_heads",), 0),
    ("Qwen--Qwen2.5-7B-Instruct.json", ("num_key_value_heads",), 0),
    ("Qwen--Qwen2.5-7B-Instruct.json", ("head_dim",), "32"),
    ("Qwen--Qwen2.5-7B-Instruct.json", ("architectures",), 7),
    ("Qwen--Qwen2.5-7B-Instruct.json", ("hidden_size",), 10**5000 // 10**4000),
    ("Qwen--Qwen2.5-7B-Instruct.json", ("max_position_embeddings",), "131072"),
    ("Qwen--Qwen2.5-7B-Instruct.json", ("vocab_size",), 0),
    ("Qwen--Qwen2.5-7B-Instruct.json", ("num_attention_heads",), 2**80),
    ("meta-llama--Llama-3.1-8B.json", ("rope_scaling", "factor"), 1e308),
    ("meta-llama--Llama-3.1-8B.json", ("rope_scaling", "factor"), "8"),
    ("meta-llama--Llama-3.1-8B.json", ("rope_scaling", "original_max_position_embeddings"), {}),
    ("Qwen--Qwen3-32B-FP8.json", ("quantization_config", "weight_block_size"), [0, 0]),
    ("Qwen--Qwen3-32B-FP8.json", ("quantization_config", "weight_block_size"), -1),
    ("Qwen--Qwen3-235B-A22B.json", ("decoder_sparse_step",), 0),
    ("Qwen--Qwen3-235B-A22B.json", ("mlp_only_layers",), "abc"),
    ("google--gemma-3-4b-it.json", ("text_config", "sliding_window_pattern"), "abc"),
    ("google--gemma-3-27b-it.json", ("vision_config", "patch_size"), 1.5),
])
def test_mutated_config_exits_2_naming_file_and_field(capsys, tmp_path, name, path, value):
    d = model_dir(tmp_path, _mutated(name, path, value))
    code, _, err = timed(capsys, "plan", str(d), "--gpu", "h100", "--json", limit_s=10)
    assert code == 2, err
    assert "config.json" in err and path[-1] in err, err
    assert len(err) < 2000  # a 1000-digit value is not echoed whole


@pytest.mark.parametrize("raw,needle", [
    (b'{"model_type": "llama", "hidden_size": 4\xff}', "UTF-8"),
    (b'{"model_type": "llama", "hidden_size": ' + b"9" * 5000 + b"}", "digits"),
    (b"[" * 100_000 + b"]" * 100_000, "nested"),
    (b'{"model_type": "llama", "hidden_size": 1e999}', "out of range"),
    (b'{"model_type": "llama", "hidden_size": NaN}', "NaN"),
])
def test_unreadable_config_json(capsys, tmp_path, raw, needle):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_bytes(raw)
    code, _, err = timed(capsys, "plan", str(d), "--gpu", "h100", limit_s=5)
    assert code == 2 and "config.json" in err and needle in err, err


def test_numeric_string_is_refused_not_ignored(capsys, tmp_path):
    """vLLM compares max-length keys with numbers (min over them) and fails on a string, so
    kvplan refuses it rather than silently planning with a 2048-token fallback."""
    d = model_dir(tmp_path, {**LLAMA, "max_position_embeddings": "131072"})
    code, _, err = timed(capsys, "plan", str(d), "--gpu", "h100")
    assert code == 2 and "max_position_embeddings" in err and "without quotes" in err


# ------------------------------------------------------------------ class 5: smaller


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e300", "1e30", "0", "-5"])
def test_gpu_memory_gib_is_bounded(capsys, value):
    code, out, err = timed(capsys, "plan", "qwen2.5-7b", "--gpu", "h100", "--json",
                           f"--gpu-memory-gib={value}")
    assert code == 2 and "--gpu-memory-gib" in err
    assert "--gpu-memory-gib" in json.loads(out)["error"]["message"]  # --json: an error object


@pytest.mark.parametrize(
    "args",
    [
        ("--gpu-memory-utilization", "nan"),
        ("-tp", "0"),
        ("--max-model-len", "9" * 400),
        ("--kv-cache-memory-bytes", "9" * 30),
    ],
)
def test_other_flags_are_bounded(capsys, args):
    code, _, err = timed(capsys, "plan", "qwen2.5-7b", "--gpu", "h100", *args)
    assert code == 2 and "--" in err


def test_json_never_holds_integers_beyond_int64(capsys):
    code, out, _ = timed(capsys, "plan", "qwen2.5-7b", "--gpu", "h100", "--json",
                         "--gpu-memory-gib", "4096")
    assert code in (0, 1)

    def ints(x):
        if isinstance(x, bool):
            return
        if isinstance(x, int):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from ints(v)
        elif isinstance(x, list):
            for v in x:
                yield from ints(v)
    assert all(-(2**63) <= i < 2**63 for i in ints(json.loads(out)))


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e9"])
def test_hub_timeout_is_bounded(monkeypatch, value):
    from kvplan.errors import InvalidInputError
    from kvplan.sources import hub

    monkeypatch.setenv("KVPLAN_HUB_TIMEOUT", value)
    with pytest.raises(InvalidInputError, match="KVPLAN_HUB_TIMEOUT"):
        hub._timeout_s()


def test_compare_validates_the_workload(capsys):
    code, _, err = timed(
        capsys, "compare", "qwen2.5-7b", "--gpu", "h100", "--target-concurrency=-1"
    )
    assert code == 2 and "--target-concurrency" in err


@pytest.mark.parametrize("flag", ["--max-model-len", "--gpu-memory-utilization", "-tp"])
def test_out_of_range_values_in_files(capsys, tmp_path, flag):
    f = tmp_path / "run.sh"
    value = {"--max-model-len": "9" * 400, "--gpu-memory-utilization": "nan", "-tp": "99999999"}[
        flag
    ]
    f.write_text(f"vllm serve qwen2.5-7b {flag} {value}\n")
    code, report, _ = check_report(capsys, f)
    assert code == 2 and flag in messages(report) and "run.sh" in json.dumps(report)
    assert len(messages(report)) < 1000


@pytest.mark.parametrize("ref", ["~nosuchuser/x", "~nosuchuser", "a" * 5000, "x\0y"],
                         ids=["tilde-user-path", "tilde-user", "long", "nul"])
def test_odd_model_references(capsys, ref):
    code, _, err = timed(capsys, "plan", ref, "--gpu", "h100")
    assert code in (2, 3) and len(err) < 2000


def test_broken_pipe_keeps_the_plans_exit_code(capsys, monkeypatch):
    import io
    import sys

    from kvplan import cli

    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    for gpu, want in (("h100", 0), ("l4", 1)):
        monkeypatch.setattr(sys, "stdout", Closed())
        monkeypatch.setattr(sys, "argv", ["kvplan", "plan", "qwen2.5-32b", "--gpu", gpu])
        with pytest.raises(SystemExit) as exc:
            cli.main()
        assert exc.value.code == want
        assert "internal error" not in capsys.readouterr().err


def test_broken_pipe_in_a_real_pipe(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    p = subprocess.Popen([sys.executable, "-m", "kvplan", "plan", "qwen2.5-7b", "--gpu", "h100"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=root)
    p.stdout.readline()
    p.stdout.close()  # like `| head -1`
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and err == ""


def test_one_bad_compose_service_does_not_hide_the_others(capsys, tmp_path):
    f = tmp_path / "docker-compose.yaml"
    f.write_text("""services:
  bad:
    image: vllm/vllm-openai:v0.19.0
    command: ["qwen2.5-7b", "--max-num-seqs", "lots"]
  good:
    image: vllm/vllm-openai:v0.19.0
    command: ["qwen2.5-7b", "--max-model-len", "8192"]
  quotes:
    image: vllm/vllm-openai:v0.19.0
    command: "qwen2.5-7b 'unclosed"
""")
    code, report, _ = check_report(capsys, f)
    rows = report["deployments"]
    assert code == 2 and len(rows) == 3
    assert [r["status"] for r in rows] == ["error", "fits", "error"]
    assert "'lots' is not an integer" in rows[0]["problems"][0]["message"]


def test_one_bad_container_or_line_does_not_hide_the_others(capsys, tmp_path):
    f = tmp_path / "run.sh"
    f.write_text("vllm serve qwen2.5-7b --max-num-seqs lots\nvllm serve qwen2.5-7b\n")
    code, report, _ = check_report(capsys, f)
    assert code == 2 and [r["status"] for r in report["deployments"]] == ["error", "fits"]


def test_broken_pipe_on_stdout_and_stderr_together():
    """`kvplan plan … 2>&1 | head -1`: the problems on stderr hit the closed pipe too."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    p = subprocess.Popen(
        [sys.executable, "-m", "kvplan", "plan", "qwen2.5-72b", "--gpu", "l4", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=root,
    )
    p.stdout.readline()
    p.stdout.close()
    assert p.wait(timeout=60) == 1  # does not fit: the plan's own code, not a crash's


@pytest.mark.parametrize("text", [
    "# kvplan: gpu-count=\u00b2\nvllm serve qwen2.5-7b\n",
    "# kvplan: gpu-count=" + "9" * 5000 + "\nvllm serve qwen2.5-7b\n",
])
def test_gpu_count_directive_must_be_a_number(capsys, tmp_path, text):
    f = tmp_path / "run.sh"
    f.write_text(text)
    code, report, _ = check_report(capsys, f)
    assert code == 2 and "gpu-count" in messages(report)


def test_compose_gpu_count_that_is_not_a_number_is_ignored(capsys, tmp_path):
    f = tmp_path / "docker-compose.yaml"
    f.write_text("services:\n  a:\n    image: vllm/vllm-openai:v0.8.5\n    command: [qwen2.5-7b]\n"
                 '    deploy: {resources: {reservations: {devices: [{count: "\u00b2"}]}}}\n')
    code, report, _ = check_report(capsys, f)
    assert code == 0, messages(report)


@pytest.mark.parametrize("word", ['""', '"  "', '" --lora-adapters"'])
def test_empty_or_blank_argument_words(capsys, tmp_path, word):
    """An empty or blank argument word (`""`) on an engine whose unmodelled-feature table is
    consulted: it used to end in an internal error (IndexError) instead of a report."""
    f = tmp_path / "run.sh"
    f.write_text(f"text-generation-launcher --model-id qwen2.5-7b {word}\n")
    code, report, _ = check_report(capsys, f)
    assert code == 0, messages(report)
    assert "feature-not-modelled" not in {p["code"] for r in report["deployments"]
                                          for p in r["problems"]}
