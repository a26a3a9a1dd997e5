"""SGLang LoRA (--enable-lora, --lora-paths, --max-loras-per-batch, --max-lora-rank,
--lora-target-modules, --max-loaded-loras) and TGI's unmodelled --speculate / --lora-adapters
(docs/features.md).

Sources (sgl-project/sglang main-branch copies): lora/mem_pool.py LoRAMemoryPool @00639c4d —
per decoder layer and target module one A buffer (max_loras_per_batch, r × stacked, input dim)
and one B buffer (max_loras_per_batch, output dim, r); row-parallel modules (o_proj,
down_proj) split A's input dim by TP, column-parallel ones (qkv_proj, gate_up_proj) B's output
dim; lora/utils.py @01235a16 get_default_hidden_dim (qkv_proj out = head_dim × (heads + 2 kv
heads), gate_up_proj out = 2 × intermediate) and get_stacked_multiply (qkv 3, gate_up 2);
the pool is built in init_lora_manager(), before init_memory_pool() (model_runner.py), so it
comes out of mem_fraction_static's rest like the weights. Llama-3.1-8B (config.json):
hidden 4096, 32 heads, 8 KV heads, head_dim 128, intermediate 14336, 32 layers, vocab 128256;
bf16 = 2 bytes.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from clirun import run

from kvplan import plan
from kvplan.deploy.commands import Templates, parse_args
from kvplan.engines.sglang import LORA_LINEAR, lora_pool
from kvplan.errors import InvalidInputError
from kvplan.knobs import Knobs
from kvplan.sources.catalog import resolve_model

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"

# Per layer, per adapter slot, elements, TP1 (r = 16):
#   qkv_proj   A 3·16 × 4096 = 196,608     B (4096 + 2·1024) × 16 = 98,304
#   o_proj     A 16 × 4096  =  65,536      B 4096 × 16 = 65,536
#   gate_up    A 2·16 × 4096 = 131,072     B 2·14336 × 16 = 458,752
#   down_proj  A 16 × 14336 = 229,376      B 4096 × 16 = 65,536
#   sum 1,310,720 → × 8 slots × 2 B = 20,971,520 per layer
#   → × 32 layers = 671,088,640 (640 MiB)
TP1_POOL = 671_088_640
# TP2: qkv B (2048 + 2·512) × 16 = 49,152; o_proj A 16 × 2048 = 32,768;
#   gate_up B 14336 × 16 = 229,376; down A 16 × 7168 = 114,688 (the rest unchanged)
#   sum 196,608 + 49,152 + 32,768 + 65,536 + 131,072 + 229,376 + 114,688 + 65,536 = 884,736
#   → × 16 B = 14,155,776 per layer → × 32 = 452,984,832 (432 MiB)
TP2_POOL = 452_984_832


def _llama():
    return resolve_model(LLAMA8)


@pytest.mark.parametrize(("tp", "expected"), [(1, TP1_POOL), (2, TP2_POOL)])
def test_pool_bytes_llama8b_hand_worked(tp, expected):
    pool = lora_pool(_llama(), tp=tp, max_loras=8, rank=16, modules=LORA_LINEAR, dtype="bfloat16")
    assert pool.gpu_bytes == expected
    assert pool.modules == ("down_proj", "gate_up_proj", "o_proj", "qkv_proj")
    assert pool.skipped == ()


@pytest.mark.parametrize(("tp", "expected", "cell"),
                         [(1, TP1_POOL, 131_072), (2, TP2_POOL, 65_536)])
def test_pool_comes_out_of_the_kv_pool(tp, expected, cell):
    """rest = f × free_before_load − weights − LoRA pool: the KV pool loses pool / cell tokens
    (cell = 8 KV heads / tp × 128 × 2 × 32 layers × 2 B; 671,088,640 / 131,072 = 5,120 at TP1,
    452,984,832 / 65,536 = 6,912 at TP2 — whole cells, so the floor loses nothing)."""
    base = plan(LLAMA8, "h100", engine="sglang", tensor_parallel_size=tp)
    p = plan(LLAMA8, "h100", engine="sglang", tensor_parallel_size=tp, enable_lora=True,
             max_lora_rank=16, lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                    "gate_proj", "up_proj", "down_proj"])
    assert p.lora is not None and p.lora.gpu_bytes == expected
    assert p.memory.lora_bytes == expected
    assert p.lora.max_loras == 8  # --max-loras-per-batch default (server_args.py)
    assert p.kv_cache.bytes_per_token == cell
    assert base.kv_cache.tokens - p.kv_cache.tokens == expected // cell
    assert p.memory.weights_bytes - base.memory.weights_bytes == expected


def test_all_adds_embedding_and_lm_head_buffers():
    """'all' = the linear modules + embed_tokens + lm_head (lora_manager.py init_lora_shapes).
    embed_tokens A 16 × 128,256 = 2,052,096, B 4096 × 16 = 65,536 → × 16 B = 33,882,112 (not
    sharded); lm_head A 16 × 4096 = 65,536, B vocab × 16: TP1 128,256 → 33,882,112; TP2 the
    padded vocab (128,256 is a multiple of 64) / 2 = 64,128 → (65,536 + 1,026,048) × 16 B =
    17,465,344."""
    m = _llama()
    modules = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "embed_tokens", "lm_head")
    assert lora_pool(m, tp=1, max_loras=8, rank=16, modules=modules,
                     dtype="bfloat16").gpu_bytes == TP1_POOL + 2 * 33_882_112
    assert lora_pool(m, tp=2, max_loras=8, rank=16, modules=modules,
                     dtype="bfloat16").gpu_bytes == TP2_POOL + 33_882_112 + 17_465_344
    p = plan(LLAMA8, "h100", engine="sglang", enable_lora=True, max_lora_rank=16,
             lora_target_modules="all")
    assert p.lora.gpu_bytes == 738_852_864


def test_q_and_v_only_still_get_the_fused_qkv_buffers():
    """SGLang normalizes q_proj / v_proj to qkv_proj and allocates its fused buffers:
    (196,608 + 98,304) × 8 × 2 B × 32 layers = 150,994,944; rank 64 is four times that."""
    m = _llama()
    assert lora_pool(m, tp=1, max_loras=8, rank=16, modules=("qkv_proj",),
                     dtype="bfloat16").gpu_bytes == 150_994_944
    p = plan(LLAMA8, "h100", engine="sglang", enable_lora=True, max_lora_rank=64, max_loras=8,
             lora_target_modules=["q_proj", "v_proj"])
    assert p.lora.gpu_bytes == 4 * 150_994_944
    assert p.lora.modules == ["qkv_proj"]


def test_moe_expert_buffers_qwen3_30b_a3b():
    """Qwen3-30B-A3B (config.json: hidden 2048, 48 layers, 32 heads, 4 KV heads, head_dim 128,
    128 experts of moe_intermediate 768, vocab 151,936; no shared expert), TP1, rank 16, 8 slots,
    'all'. Per layer per slot: gate_up_proj_moe A 128 × 32 × 2048 = 8,388,608, B 128 × 1536 ×
    16 = 3,145,728; down_proj_moe A 128 × 16 × 768 = 1,572,864, B 128 × 2048 × 16 = 4,194,304
    (17,301,504 → × 16 B × 48 = 13,287,555,072); qkv A 3 × 16 × 2048 = 98,304, B (4096 + 2 ×
    512) × 16 = 81,920; o_proj A 16 × 4096 = 65,536, B 2048 × 16 = 32,768 (278,528 → × 16 B
    × 48 = 213,909,504); embed_tokens and lm_head (16 × 151,936 + 2048 × 16) × 16 B = 39,419,904
    each. Total 13,580,304,384."""
    p = plan("Qwen/Qwen3-30B-A3B", "h100", engine="sglang", enable_lora=True, max_lora_rank=16,
             lora_target_modules="all")
    assert p.lora.gpu_bytes == 13_580_304_384
    assert "gate_up_proj_moe" in p.lora.modules
    assert not any(pr.code == "lora-partly-modelled" for pr in p.problems)


def test_lora_paths_turn_lora_on_and_count_host_copies():
    """--lora-paths alone enables LoRA (lora_hook.py); rank and modules come from the adapters
    there, so kvplan assumes rank 16 and the four linear modules and warns. One adapter's host
    copy, unsharded: 1,310,720 elements per layer (the TP1 sum above) × 32 × 2 B = 83,886,080;
    two adapters loaded at start → 167,772,160 per GPU worker."""
    p = plan(LLAMA8, "h100", engine="sglang", lora_paths=["a=/adapters/a", "b=/adapters/b"])
    assert p.lora.gpu_bytes == TP1_POOL
    assert p.lora.adapter_bytes == 83_886_080
    assert p.lora.max_cpu_loras == 2
    assert p.lora.host_bytes_per_worker == 167_772_160
    assert any(pr.code == "lora-assumed" for pr in p.problems)
    assert "--lora-paths a=/adapters/a b=/adapters/b" in p.command
    capped = plan(LLAMA8, "h100", engine="sglang", lora_paths=["a=/x"], max_lora_rank=16,
                  lora_target_modules=["all"], max_cpu_loras=16)
    assert capped.lora.max_cpu_loras == 16
    assert not any(pr.code == "lora-assumed" for pr in capped.problems)


def test_no_lora_without_the_switch_or_paths():
    p = plan(LLAMA8, "h100", engine="sglang", max_loras=4)
    assert p.lora is None and p.memory.lora_bytes == 0


# ------------------------------------------------------------ launch line and check


def test_launch_line_round_trips_through_check_parser():
    p = plan(LLAMA8, "h100", engine="sglang", enable_lora=True, max_loras=4, max_lora_rank=32,
             lora_target_modules=["q_proj", "v_proj", "o_proj"], max_cpu_loras=8)
    assert ("--enable-lora --max-loras-per-batch 4 --max-lora-rank 32 --lora-target-modules "
            "o_proj qkv_proj --max-loaded-loras 8") in p.command
    argv = p.command.split()[3:]  # after `python -m sglang.launch_server`
    found = parse_args(argv, "sglang", file="x.sh", line=1, templates=Templates({}), text=p.command)
    k = Knobs.parse(found.knobs)
    assert (k.enable_lora, k.max_loras, k.max_lora_rank, k.max_cpu_loras) == (True, 4, 32, 8)
    assert k.lora_target_modules == ["o_proj", "qkv_proj"]
    again = plan(LLAMA8, "h100", engine="sglang", **found.knobs)
    assert again.command == p.command and again.lora.gpu_bytes == p.lora.gpu_bytes


def test_check_reads_sglang_lora_flags(capsys, tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text(textwrap.dedent(f"""\
        python -m sglang.launch_server --model-path {LLAMA8} \\
          --lora-paths finance=/lora/finance code=/lora/code --max-loras-per-batch 4 \\
          --max-lora-rank 16 --lora-target-modules q_proj k_proj v_proj o_proj gate_proj \\
          up_proj down_proj --lora-backend triton
    """))
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert code == 0, row
    # 4 slots: half the 8-slot pool of the module docstring
    assert row["plan"]["lora"]["gpu_bytes"] == TP1_POOL // 2
    assert row["plan"]["lora"]["max_cpu_loras"] == 2
    codes = {p["code"] for p in row["problems"]}
    assert "feature-not-modelled" not in codes
    assert "lora-assumed" not in codes


@pytest.mark.parametrize(("flags", "needle"), [
    ("--enable-lora", "needs both --max-lora-rank and --lora-target-modules"),
    ("--enable-lora --max-lora-rank 16 --lora-target-modules all q_proj", "only"),
    ("--enable-lora --max-lora-rank 16 --lora-target-modules qkv_proj mlp", "mlp"),
    ("--lora-paths a=/x --max-loras-per-batch 4 --max-loaded-loras 2",
     "below --max-loras-per-batch"),
    ("--lora-paths a=/x b=/y c=/z --max-loras-per-batch 1 --max-loaded-loras 2", "exceed"),
    ("--lora-paths", "missing its value"),
    ("--lora-paths a=/x --max-loras-per-batch 0", "--max-loras-per-batch 0 is out of range"),
])
def test_check_bad_lora_flags_exit_2(capsys, tmp_path, flags, needle):
    f = tmp_path / "serve.sh"
    f.write_text(f"python -m sglang.launch_server --model-path {LLAMA8} {flags}\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    assert code == 2
    row = json.loads(out)["deployments"][0]
    assert row["status"] == "error"
    assert needle in json.dumps(row)


def test_cli_bad_lora_value_exits_2_without_traceback(capsys):
    code, out, err = run(capsys, "plan", LLAMA8, "--gpu", "h100", "--engine", "sglang",
                         "--enable-lora")
    assert code == 2 and out == ""
    assert "--lora-target-modules" in err and "Traceback" not in err


def test_api_error_names_the_knob():
    with pytest.raises(InvalidInputError, match="--lora-target-modules") as e:
        plan(LLAMA8, "h100", engine="sglang", enable_lora=True, max_lora_rank=8,
             lora_target_modules=["gate"])
    assert e.value.knob == "lora_target_modules"


@pytest.mark.parametrize("engine", ["vllm", "tgi"])
def test_sglang_only_lora_settings_refused_elsewhere(engine):
    with pytest.raises(InvalidInputError, match="not a setting"):
        plan(LLAMA8, "h100", engine=engine, lora_target_modules=["all"])


# ------------------------------------------------------------------------- TGI
# --speculate N (text-generation-inference v3.3.7): n-gram speculation loads nothing; every
# request reserves N more KV slots (backends/v3/src/queue.rs: input + max_new_tokens + speculate
# − 1; flash_causal_lm.py from_pb maps prompt + max_new − 1 + speculate tokens to blocks); the
# warm-up batch's extra blocks are added back, so the block count is unchanged.


def test_tgi_speculate_reserves_n_more_slots_per_request():
    """Same KV pool; concurrency = tokens / (8192 + 2) instead of tokens / 8192; with
    flashinfer's 1-token blocks one request takes 8,194 blocks."""
    base = plan(LLAMA8, "h100", engine="tgi", max_model_len=8192)
    p = plan(LLAMA8, "h100", engine="tgi", max_model_len=8192,
             speculative_config={"method": "ngram", "num_speculative_tokens": 2})
    t = base.kv_cache.tokens
    assert p.kv_cache.tokens == t
    assert p.kv_cache.block_size == 1
    assert p.kv_cache.max_concurrency == pytest.approx(round(t / 8194, 2), abs=0.005)
    assert p.kv_cache.bytes_per_request == 8194 * p.kv_cache.bytes_per_block
    assert p.speculative.method == "ngram" and p.speculative.num_speculative_tokens == 2
    assert p.speculative.draft_weights_bytes == 0
    assert p.memory.weights_bytes == base.memory.weights_bytes
    assert p.command.endswith("--speculate 2")
    assert any(pr.code == "tgi-speculate" for pr in p.problems)


def test_check_reads_tgi_speculate(capsys, tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text(f"text-generation-launcher --model-id {LLAMA8} --max-total-tokens 8192 "
                 "--speculate 3 --lora-adapters org/a,org/b\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert code == 0, row
    assert row["plan"]["speculative"]["num_speculative_tokens"] == 3
    warned = [p["message"] for p in row["problems"] if p["code"] == "feature-not-modelled"]
    # --lora-adapters stays a warning: the adapters' rank and modules are in their own files
    assert len(warned) == 1 and "LoRA adapters" in warned[0]


@pytest.mark.parametrize(("flags", "needle"), [
    ("--speculate 0", "at least 1 token"),
    ("--speculate two", "not an integer"),
])
def test_check_bad_tgi_speculate_exit_2(capsys, tmp_path, flags, needle):
    f = tmp_path / "serve.sh"
    f.write_text(f"text-generation-launcher --model-id {LLAMA8} {flags}\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    assert code == 2
    assert needle in json.dumps(json.loads(out)["deployments"][0])


def test_tgi_refuses_draft_model_methods():
    with pytest.raises(InvalidInputError, match="TGI has no mtp speculation") as e:
        plan(LLAMA8, "h100", engine="tgi",
             speculative_config={"method": "mtp", "num_speculative_tokens": 2})
    assert e.value.knob == "speculative_config"
