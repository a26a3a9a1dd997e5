"""SGLang speculative decoding (docs/features.md), pinned to hand-worked numbers.

Sources: sgl-project/sglang main-branch snapshots in the public code index —
python/sglang/srt/model_executor/pool_configurator.py (@003fca80: DefaultPoolConfigurator scales
the target's cell by (1 + draft layers / target layers) for EAGLE/STANDALONE),
mem_cache/kv_cache_configurator.py (@003fca80: the draft worker reuses the target's
MemoryPoolConfig, so its pool holds the same max_total_num_tokens), model_runner.py
(eagle_draft_num_layers = the draft config's num_nextn_predict_layers, else num_hidden_layers),
arg_groups/speculative_hook.py (@004c82e0: NEXTN → EAGLE, the draft path defaults to the model
for DeepSeek-V3 and friends, auto (steps, topk, draft tokens), max_running_requests reset to 48),
speculative/eagle_worker.py (@00559eac: the draft ModelRunner is built after the target's, shares
req_to_token and the allocator, and shares the target's embedding, and LM head for non-EAGLE3).
Planned as SGLang 0.5.23 (kvplan's newest modelled release) unless said otherwise.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from clirun import run
from drafts import write_config

from kvplan import plan
from kvplan.deploy.commands import Templates, parse_args
from kvplan.engines import sglang
from kvplan.errors import InvalidInputError
from kvplan.knobs import Knobs
from kvplan.specs import SpeculativeConfig

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
DSV3 = "deepseek-ai/DeepSeek-V3"

# An EAGLE-1 head for Llama-2-7B-chat, laid out like the public EAGLE-llama2-chat-7B heads (one
# Llama decoder layer, 32 KV heads of 128); only its KV shape matters for the replay below.
EAGLE1_LLAMA2_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32,
    "num_hidden_layers": 1, "vocab_size": 32000, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "float16",
}


def spec(**kw: object) -> str:
    return json.dumps(kw)


# ------------------------------------------------------------------ memory, hand-worked


def test_eagle3_llama_h100_draft_kv_and_pool_hand_worked(eagle3_dir):
    """Llama-3.1-8B-Instruct + EAGLE-3 head, H100, TP1, bf16, SGLang 0.5.23.

    Target cell: 8 KV heads × (128 + 128) × 32 layers × 2 B = 131,072 B per token.
    Draft layers: the head's num_hidden_layers = 1 (no num_nextn_predict_layers).
    Cell with the draft (pool_configurator.py): int(131,072 × (1 + 1/32)) = 135,168 B; the
    draft's share 135,168 − 131,072 = 4,096 B = 1 layer × 8 × 256 × 2 B.
    Budget (unchanged by the draft, whose weights load after the pool is sized):
      f = 0.83 (H100 TP1 default), free before load = 84,943,044,608 − 633,507,676 context
      = 84,309,536,932; floor(0.83 × that) = 69,976,915,653; − 16,112,418,816 weights
      = 53,864,496,837 B.
    Tokens: 53,864,496,837 // 135,168 = 398,500 (135,168 × 398,500 = 53,864,448,000) in the
    target pool and the same 398,500 in the draft's pool; without the draft 53,864,496,837 //
    131,072 = 410,953.
    Tree shape from num_speculative_tokens 3: topk 1 → num_draft_tokens = 3 + 1 = 4.
    Draft weights (sglang/srt/models/llama_eagle3.py has the tensors of vLLM's layout: layer 0's
    qkv over 2 × 4096, hidden_norm, fc 3 × 4096 → 4096, norm, lm_head over 32,000 rows, d2t;
    embedding shared, eagle_worker.py set_embed) = 424,689,664 × 2 B + 32,000 × 8 B
    = 849,635,328 B (sum written out in tests/engines/test_vllm_features.py)."""
    base = plan(LLAMA, "h100", engine="sglang")
    p = plan(LLAMA, "h100", engine="sglang",
             speculative_config=spec(method="eagle3", model=str(eagle3_dir),
                                     num_speculative_tokens=3))
    assert base.kv_cache.bytes_per_token == 131_072 and base.kv_cache.tokens == 410_953
    assert p.memory.kv_cache_bytes == base.memory.kv_cache_bytes == 53_864_496_837
    assert p.kv_cache.bytes_per_token == 135_168
    assert p.kv_cache.tokens == 398_500
    sp = p.speculative
    assert sp is not None and sp.method == "eagle3" and sp.draft_layers == 1
    assert sp.draft_kv_bytes_per_token == 4_096
    assert sp.draft_pool_tokens == 398_500
    assert (sp.num_speculative_tokens, sp.eagle_topk, sp.num_draft_tokens) == (3, 1, 4)
    assert sp.draft_weights_bytes == 849_635_328 == p.memory.draft_weights_bytes
    # shown with the weights on the GPU, but outside mem_fraction_static
    assert p.memory.weights_bytes - base.memory.weights_bytes == 849_635_328
    # max_running_requests reset to 48 (speculative_hook.py) instead of min(clamp(int(398,500 /
    # 131,072 × 512), 2048, 4096), 398,500 // 2) = 2048
    assert p.inputs["max_num_seqs"].value == 48
    assert base.inputs["max_num_seqs"].value == 2048
    assert any(x.code == "speculative-max-running-requests" for x in p.problems)


def test_nextn_deepseek_v3_tp8_h200_hand_worked():
    """DeepSeek-V3, TP8 on H200, --speculative-algorithm NEXTN, SGLang 0.5.23.

    MLA cell (replicated on every rank): (kv_lora_rank 512 + rope 64) × 61 layers × 2 B
    = 70,272 B. NEXTN → EAGLE with the model as its own draft (speculative_hook.py: DeepSeek-V3
    is in the list whose draft path defaults to the model); draft layers = its
    num_nextn_predict_layers = 1.
    Cell: int(70,272 × (1 + 1/61)) = int(71,423.99…) in floats? 70,272 / 61 = 1,152 exactly and
    Python's 70,272 × 1.0163934426229508 = 71,424.0 → 71,424 B; draft share 1,152 B (one MLA layer).
    Budget: f = 0.886, free before load 150,109,880,320 − 2,508,361,564 = 147,601,518,756;
    floor(0.886 × that) = 130,774,945,617; − 85,509,275,648 weights = 45,265,669,969 B.
    Tokens: 45,265,669,969 // 71,424 = 633,759 (71,424 × 633,759 = 45,265,602,816); without
    the draft 45,265,669,969 // 70,272 = 644,149.
    Auto tree for DeepseekV3ForCausalLM (3, 1, 4); max_running_requests 48."""
    base = plan(DSV3, "h200", engine="sglang", tensor_parallel_size=8)
    p = plan(DSV3, "h200", engine="sglang", tensor_parallel_size=8,
             speculative_config=spec(method="mtp"))
    assert base.kv_cache.bytes_per_token == 70_272 and base.kv_cache.tokens == 644_149
    assert p.memory.kv_cache_bytes == base.memory.kv_cache_bytes == 45_265_669_969
    assert p.kv_cache.bytes_per_token == 71_424
    assert p.kv_cache.tokens == 633_759
    sp = p.speculative
    assert sp is not None and sp.method == "mtp" and sp.draft_model is None
    assert sp.draft_layers == 1 and sp.draft_kv_bytes_per_token == 1_152
    assert sp.draft_pool_tokens == 633_759
    assert (sp.num_speculative_tokens, sp.eagle_topk, sp.num_draft_tokens) == (3, 1, 4)
    assert p.inputs["max_num_seqs"].value == 48
    # SGLang's EAGLE path without a draft on DeepSeek-V3 is the same thing
    q = plan(DSV3, "h200", engine="sglang", tensor_parallel_size=8,
             speculative_config=spec(method="eagle"))
    assert q.speculative is not None and q.speculative.method == "mtp"
    assert q.kv_cache.tokens == 633_759


def test_nextn_draft_shares_the_target_lm_head():
    """eagle_worker.py: every non-EAGLE3 draft gets the target's embedding and LM head
    (set_embed_and_head), so SGLang's NEXTN draft is vLLM's MTP draft (which counts its own
    shared_head.head) less one LM-head shard: 129,280 rows × 7,168 × 2 B / TP 8 = 231,669,760 B
    (a multiple of 512, so allocated = tensor bytes)."""
    v = plan(DSV3, "h200", tensor_parallel_size=8, speculative_config=spec(method="mtp"))
    s = plan(DSV3, "h200", engine="sglang", tensor_parallel_size=8,
             speculative_config=spec(method="mtp"))
    assert v.speculative is not None and s.speculative is not None
    assert v.speculative.draft_weights_bytes - s.speculative.draft_weights_bytes == 231_669_760


@pytest.mark.parametrize(("tp", "dp", "per_rank"), [(1, 8, 6), (4, 2, 24)])
def test_the_reset_48_is_the_whole_servers_under_dp_attention(tp, dp, per_rank):
    """SGLang resets --max-running-requests to 48 for the server (speculative_hook.py
    _handle_eagle_family, 0.5.23), and under DP attention each rank runs max(1, 48 // dp_size)
    (mem_cache/kv_cache_configurator.py resolve_max_num_reqs; tp_worker.py `// dp_size` in
    0.4.x - 0.5.6): --tp-size 8 --dp-size 8 → 48 // 8 = 6 per rank, --tp-size 8 --dp-size 2 →
    48 // 2 = 24. Both pools hold far more (> 100,000 tokens), so the split binds; the
    performance figures run at that many requests per rank, and the launch line (no workload)
    leaves SGLang's own default in place."""
    p = plan(DSV3, "h200", engine="sglang", tensor_parallel_size=tp, data_parallel_size=dp,
             enable_dp_attention=True, enable_expert_parallel=True, max_model_len=32768,
             speculative_config=spec(method="mtp", num_speculative_tokens=3))
    assert p.kv_cache.tokens > 100_000
    assert p.inputs["max_num_seqs"].value == per_rank
    assert p.performance is not None and p.performance.concurrency == per_rank
    assert "--max-running-requests" not in p.command
    note = next(x for x in p.problems if x.code == "speculative-max-running-requests")
    assert f"48 // {dp} = {per_rank}" in note.message


def test_ngram_has_no_draft_memory_but_caps_requests():
    """NGRAM: no draft model and no draft KV (the cell is unchanged); num_draft_tokens defaults
    to 12 and max_running_requests to 48 (speculative_hook.py _handle_ngram)."""
    base = plan(LLAMA, "h100", engine="sglang")
    p = plan(LLAMA, "h100", engine="sglang", speculative_config=spec(method="ngram"))
    assert p.kv_cache.tokens == base.kv_cache.tokens
    assert p.speculative is not None and p.speculative.draft_layers == 0
    assert p.speculative.draft_weights_bytes == 0 and p.speculative.num_draft_tokens == 12
    assert p.inputs["max_num_seqs"].value == 48
    assert "--speculative-algorithm NGRAM" in p.command


def test_auto_parameters_by_architecture():
    """_auto_choose_speculative_params: Llama (5, 4, 8); DeepSeek-V3 and others (3, 1, 4);
    STANDALONE always (3, 1, 4)."""
    assert sglang.auto_spec_params("EAGLE3", "LlamaForCausalLM") == (5, 4, 8)
    assert sglang.auto_spec_params("EAGLE", "DeepseekV3ForCausalLM") == (3, 1, 4)
    assert sglang.auto_spec_params("EAGLE", "Qwen3ForCausalLM") == (3, 1, 4)
    assert sglang.auto_spec_params("STANDALONE", "LlamaForCausalLM") == (3, 1, 4)


def test_an_explicit_max_running_requests_is_kept(eagle3_dir):
    p = plan(LLAMA, "h100", engine="sglang", max_num_seqs=256,
             speculative_config=spec(method="eagle3", model=str(eagle3_dir)))
    assert p.inputs["max_num_seqs"].value == 256
    assert not any(x.code == "speculative-max-running-requests" for x in p.problems)
    assert "--max-running-requests 256" in p.command


# ------------------------------------------------------------------ the replayed log


def test_replay_sglang_docs_eagle_log_2025_01(tmp_path):
    """reference/sglang_logs_more.csv, the SGLang docs notebook speculative_decoding.ipynb run of
    2025-01-28 (main branch then; planned as 0.4.1, the TP-table era): Llama-2-7b-chat-hf fp16,
    1 GPU (80 GB; 78.81 GB free before load), --speculative-algo EAGLE --speculative-draft
    lmzheng/sglang-EAGLE-llama2-chat-7B --speculative-num-steps 5 --speculative-eagle-topk 8
    --speculative-num-draft-tokens 64 --mem-fraction 0.7.

    Logged: target "K size: 21.25 GB" = 87,056 tokens × 32 layers × 32 heads × 128 × 2 B
    / 2^30 = 21.25 ✓ (max_total_num_tokens=87056: the target pool is sized without the draft);
    draft "K size: 0.82 GB". The rule of that era (model_runner.py init_memory_pool, 0.4.x):
    draft pool = target tokens + max_num_reqs × num_steps + 100, with max_num_reqs =
    min(max(int(87,056 / 4,096 × 512), 2048), 4096) = 4096 → 87,056 + 20,480 + 100 = 107,636
    tokens × 1 layer × 32 × 128 × 2 B = 881,754,112 B = 0.821 GiB → "0.82 GB" ✓.
    kvplan end to end (H100 context estimate, not the logged 78.81 GB): target 86,857 tokens
    (−0.23 % vs 87,056), draft pool 86,857 + 20,580 = 107,437 (0.820 GiB, prints 0.82)."""
    sc = SpeculativeConfig(method="eagle", model="x", num_speculative_tokens=5, eagle_topk=8,
                           num_draft_tokens=64)
    assert sglang.spec_headroom_tokens(sc, (0, 4, 1), 4096) == 4096 * 5 + 100 == 20_580
    pool = 87_056 + 20_580
    assert pool == 107_636
    assert round(pool * 1 * 32 * 128 * 2 / 2**30, 2) == 0.82
    assert round(87_056 * 32 * 32 * 128 * 2 / 2**30, 2) == 21.25

    head = write_config(tmp_path, "eagle-llama2", EAGLE1_LLAMA2_CONFIG)
    p = plan("meta-llama/Llama-2-7b-hf", "h100", engine="sglang", engine_version="0.4.1",
             gpu_memory_utilization=0.7,
             speculative_config=spec(method="eagle", model=str(head), num_speculative_tokens=5,
                                     eagle_topk=8, num_draft_tokens=64))
    assert p.kv_cache.bytes_per_token == 524_288  # no draft term in this era
    assert abs(p.kv_cache.tokens - 87_056) / 87_056 < 0.005
    sp = p.speculative
    assert sp is not None and sp.draft_kv_bytes_per_token == 16_384
    assert sp.draft_pool_tokens == p.kv_cache.tokens + 20_580
    assert round(sp.draft_pool_tokens * 8_192 / 2**30, 2) == 0.82
    assert any(x.code == "engine-version-boundary-uncertain" for x in p.problems)


def test_middle_era_headroom_counts_topk_and_verify_tokens():
    """model_runner.py init_memory_pool (later 0.4.x / 0.5.x copies): headroom = reqs × steps ×
    topk + reqs × num_draft_tokens + 100, added to the target's pool too; with the 48-request
    reset: 48 × 5 × 8 + 48 × 64 + 100 = 1,920 + 3,072 + 100 = 5,092."""
    sc = SpeculativeConfig(method="eagle", model="x", num_speculative_tokens=5, eagle_topk=8,
                           num_draft_tokens=64)
    assert sglang.spec_headroom_tokens(sc, (0, 4, 6), 48) == 5_092


# ------------------------------------------------------------ launch line and check


def test_launch_line_round_trips_through_check(eagle3_dir):
    """plan → command → the SGLang flag parser → the same speculative knob."""
    p = plan(LLAMA, "h100", engine="sglang",
             speculative_config=spec(method="eagle3", model=str(eagle3_dir),
                                     num_speculative_tokens=4, eagle_topk=2, num_draft_tokens=8))
    assert ("--speculative-algorithm EAGLE3 --speculative-draft-model-path "
            f"{eagle3_dir} --speculative-num-steps 4 --speculative-eagle-topk 2 "
            "--speculative-num-draft-tokens 8") in p.command
    argv = p.command.split()[3:]  # after `python -m sglang.launch_server`
    found = parse_args(argv, "sglang", file="x.sh", line=1, templates=Templates({}), text=p.command)
    k = Knobs.parse(found.knobs)
    assert found.model == LLAMA
    sc = k.speculative_config
    assert sc is not None
    assert (sc.method, sc.model, sc.num_speculative_tokens, sc.eagle_topk, sc.num_draft_tokens) == (
        "eagle3", str(eagle3_dir), 4, 2, 8)
    again = plan(LLAMA, "h100", engine="sglang", **found.knobs)
    assert again.command == p.command and again.kv_cache.tokens == p.kv_cache.tokens


def test_nextn_launch_line_round_trips():
    p = plan(DSV3, "h200", engine="sglang", tensor_parallel_size=8,
             speculative_config=spec(method="mtp", num_speculative_tokens=2))
    assert ("--speculative-algorithm NEXTN --speculative-num-steps 2 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 3") in p.command
    found = parse_args(p.command.split()[3:], "sglang", file="x.sh", line=1,
                       templates=Templates({}), text=p.command)
    assert found.knobs["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 2,
                                                 "eagle_topk": 1, "num_draft_tokens": 3}


def test_check_reads_sglang_speculative_flags(capsys, tmp_path, eagle3_dir):
    """Deployment files: SGLang's argparse takes unique prefixes, and the 2025 docs wrote
    --speculative-algo / --speculative-draft; NEXTN with the model's own path is MTP."""
    f = tmp_path / "serve.sh"
    f.write_text(textwrap.dedent(f"""\
        python -m sglang.launch_server --model-path {LLAMA} --speculative-algo EAGLE3 \\
          --speculative-draft {eagle3_dir} --mem-fraction-static 0.8
        python -m sglang.launch_server --model-path {DSV3} --tp 8 \\
          --speculative-algorithm NEXTN --speculative-draft-model-path {DSV3}
    """))
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h200", "--json")
    rows = json.loads(out)["deployments"]
    assert rows[0]["plan"]["speculative"]["method"] == "eagle3"
    assert rows[0]["plan"]["speculative"]["num_draft_tokens"] == 8  # Llama auto (5, 4, 8)
    assert rows[1]["plan"]["speculative"]["method"] == "mtp"
    assert rows[1]["plan"]["speculative"]["draft_layers"] == 1
    assert not any(p["code"] == "flags-not-modelled" for r in rows for p in r["problems"])


# ------------------------------------------------------------------ bad values


@pytest.mark.parametrize(("sc", "algo", "name"), [
    (spec(method="ngram"), "NGRAM", "ngram"),
    (spec(method="draft_model", model="Qwen/Qwen3-0.6B"), "STANDALONE", "standalone"),
])
@pytest.mark.parametrize("flags", [["--enable-dp-attention"], ["--enable-expert-parallel"]])
def test_ngram_and_standalone_are_refused_under_dp_attention(capsys, sc, algo, name, flags):
    """SGLang stops at start-up: "Currently ngram speculative decoding does not support dp
    attention." (arg_groups/speculative_hook.py _handle_ngram, 0.5.23; server_args.py from
    NGRAM's first release, 0.5.3) and the same for standalone (_handle_eagle_family; from
    0.5.2). kvplan's EP over -dp 2 is SGLang's DP attention too. Exit 2, as any refusal."""
    code, out, err = run(capsys, "plan", "Qwen/Qwen3-30B-A3B", "--gpu", "h100", "--engine",
                         "sglang", "-tp", "1", "-dp", "2", *flags, "--speculative-config", sc)
    assert code == 2 and "Traceback" not in err
    assert f"--speculative-algorithm {algo} with DP attention" in err
    assert f"Currently {name} speculative decoding does not support dp attention" in err
    # the same draft without DP attention (-dp 2 whole replicas) plans
    code, _, err = run(capsys, "plan", "Qwen/Qwen3-30B-A3B", "--gpu", "h100", "--engine",
                       "sglang", "-tp", "1", "-dp", "2", "--speculative-config", sc)
    assert code in (0, 1), err


def test_check_refuses_an_ngram_line_with_dp_attention(capsys, tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text("python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp-size 2 "
                 "--dp-size 2 --enable-dp-attention --speculative-algorithm NGRAM\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    assert code == 2
    row = json.loads(out)["deployments"][0]
    assert row["status"] == "error" and "does not support dp attention" in json.dumps(row)



@pytest.mark.parametrize(("model", "sc", "needle"), [
    (LLAMA, spec(method="mtp"), "no MTP layers"),
    (LLAMA, spec(method="eagle3"), "needs --speculative-draft-model-path"),
    (DSV3, spec(method="mtp", eagle_topk=4), "needs --speculative-num-steps"),
    (DSV3, spec(method="mtp", num_speculative_tokens=3, eagle_topk=4),
     "needs --speculative-num-draft-tokens"),
])
def test_impossible_combinations_name_the_alternatives(model, sc, needle):
    with pytest.raises(InvalidInputError, match=needle) as e:
        plan(model, "h200", engine="sglang", tensor_parallel_size=8, speculative_config=sc)
    assert e.value.hint


def test_cli_bad_speculative_value_exits_2(capsys):
    """`kvplan plan` reports input errors as text on stderr (exit 2, no traceback), as for every
    other knob; `kvplan check --json` gives the JSON row (next test)."""
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", "--engine", "sglang", "--json",
                         "--speculative-config", '{"method": "mtp"}')
    assert code == 2 and json.loads(out)["error"]["exit_code"] == 2  # --json: the error object
    assert "no MTP layers" in err and "NGRAM" in err and "Traceback" not in err


@pytest.mark.parametrize(("flags", "needle"), [
    ("--speculative-algorithm DFLASH --speculative-draft-model-path x", "not modelled"),
    ("--speculative-num-steps 3", "without --speculative-algorithm"),
    ("--speculative-algorithm EAGLE3 --speculative-num-steps many", "not an integer"),
])
def test_check_bad_speculative_flags_exit_2_with_json(capsys, tmp_path, flags, needle):
    f = tmp_path / "serve.sh"
    f.write_text(f"python -m sglang.launch_server --model-path {LLAMA} {flags}\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    assert code == 2
    row = json.loads(out)["deployments"][0]
    assert row["status"] == "error"
    assert needle in json.dumps(row)


def test_vllm_serve_line_drops_the_sglang_only_keys():
    """eagle_topk / num_draft_tokens are SGLang's; vLLM's --speculative-config JSON has no such
    keys, so a knob read from an SGLang file and planned on vLLM leaves them out."""
    p = plan(DSV3, "h200", tensor_parallel_size=8,
             speculative_config=spec(method="mtp", num_speculative_tokens=2, eagle_topk=1,
                                     num_draft_tokens=3))
    assert '--speculative-config \'{"method":"mtp","num_speculative_tokens":2}\'' in p.command


def test_vllm_serve_line_drops_the_trtllm_only_key():
    """eagle3_one_model is TensorRT-LLM's EagleDecodingConfig key (llmapi/llm_args.py); vLLM's
    SpeculativeConfig (vllm/config/speculative.py) has no such field, so the vLLM serve line
    leaves it out like SGLang's tree keys."""
    p = plan(LLAMA, "h100", speculative_config=spec(method="ngram", num_speculative_tokens=3,
                                                    eagle3_one_model=False))
    assert '--speculative-config \'{"method":"ngram","num_speculative_tokens":3}\'' in p.command
