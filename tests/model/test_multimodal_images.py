"""Images in vision-language models (docs/features.md "Multimodal"): tokens per image, vLLM's
encoder profile, --limit-mm-per-prompt and --images-per-request, pinned to hand-worked numbers.

Sources (vLLM repo paths, release 0.11.0 unless stated): vllm/v1/worker/gpu_model_runner.py
profile_run; vllm/v1/worker/utils.py MultiModalBudget.get_max_items;
vllm/v1/core/encoder_cache_manager.py compute_mm_encoder_budget; vllm/config/multimodal.py
(default 999 per modality); vllm/model_executor/models/gemma3_mm.py and mllama4.py;
transformers processing_gemma3.py (full_image_sequence) and processing_llama4.py
(_prompt_split_image). Model facts: model_specs/configs/google--gemma-3-27b-it.json
(text hidden 5376, mm_tokens_per_image 256, vision image_size 896, 3 channels) and
meta-llama--Llama-4-Scout-17B-16E-Instruct.json (text hidden 5120, vision image_size 336,
patch 14, pixel_shuffle_ratio 0.5)."""

from __future__ import annotations

import json
import textwrap

import pytest
from clirun import run

from kvplan import plan
from kvplan.errors import InvalidInputError
from kvplan.knobs import Knobs
from kvplan.sources.catalog import resolve_model
from kvplan.specs import Workload

GEMMA = "google/gemma-3-27b-it"
SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


# ------------------------------------------------------------------ tokens per image


def test_tokens_per_image_hand_worked():
    """Gemma 3: "\\n\\n" <boi> 256 × <image_soft_token> <eoi> "\\n\\n" = 256 + 4 = 260 tokens
    ("\\n\\n" is one Gemma token). Llama 4: tile tokens P = (336 / 14)² / round(1 / 0.5²) =
    576 / 4 = 144; the largest dummy image tiles 16 × 1, plus the global tile:
    <|image_start|> + 16 × (144 + <|tile_y_separator|>) + <|image|> + 144 + <|image_end|>
    = 1 + 16 × 145 + 1 + 144 + 1 = 2467."""
    assert resolve_model(GEMMA).vision.max_tokens_per_image == 260
    assert resolve_model("google/gemma-3-4b-it").vision.max_tokens_per_image == 260
    assert resolve_model(SCOUT).vision.max_tokens_per_image == 2467
    assert resolve_model(LLAMA).vision is None


# ---------------------------------------------------------------- the encoder profile


def test_gemma3_27b_h100_encoder_profile_hand_worked():
    """gemma-3-27b-it on one H100 (vLLM 0.19.0, `vllm serve` defaults on a ≥ 70 GiB GPU:
    max_num_batched_tokens 8192, max_num_seqs 1024; max_model_len 131072):

        encoder budget = max(8192, 260)                                    = 8192 tokens
        images / prompt = max(1, min(999, 131072 // 260 = 504))            = 504
        profile items  = max(1, min(8192 // 260 = 31, 1024 × 504))        = 31
        held           = 31 × (256 × 5376 + 3 × 896²) × 2 B
                       = 31 × (1,376,256 + 2,408,448) × 2                   = 234,651,648 B

    i.e. 31 encoder outputs of 256 rows of the LM's hidden size plus 31 bf16 pixel tensors,
    kept through the LM's profile forward. With '{"image": 0}' vLLM skips the encoder."""
    p = plan(GEMMA, "h100", engine_version="0.19.0")
    mm = p.multimodal
    assert mm is not None
    assert (mm.modality, mm.limit_per_prompt, mm.limit_source) == ("image", 999, "engine-default")
    assert mm.max_tokens_per_item == 260 and mm.embeds_per_item == 256
    assert mm.encoder_budget_tokens == 8192
    assert mm.profile_items == 31
    assert mm.profile_bytes == 234_651_648
    off = plan(GEMMA, "h100", engine_version="0.19.0", limit_mm_per_prompt='{"image": 0}')
    assert off.multimodal.profile_items == 0 and off.multimodal.profile_bytes == 0
    assert p.memory.activation_bytes - off.memory.activation_bytes == 234_651_648
    assert off.memory.kv_cache_bytes - p.memory.kv_cache_bytes == 234_651_648
    codes = {pr.code for pr in p.problems}
    assert "mm-limit-unset" in codes and "encoder-profiling" not in codes
    assert "mm-limit-unset" not in {pr.code for pr in off.problems}
    assert "multimodal-encoder-off" in {pr.code for pr in off.problems}


def test_gemma3_vllm_0_11_expands_outputs_to_the_budget():
    """vLLM 0.11.0 copies each dummy output (256 rows) into a zero tensor of budget rows
    before caching it: held = 31 × (8192 × 5376 + 3 × 896²) × 2 = 31 × 46,448,640 × 2
    = 2,879,815,680 B (profile_run, `expanded_outputs`)."""
    p = plan(GEMMA, "h100", engine_version="0.11.0")
    assert p.multimodal.profile_items == 31
    assert p.multimodal.profile_bytes == 2_879_815_680


def test_a_limit_caps_items_only_through_the_length():
    """The limit bounds images per prompt; the profile batch is min(budget // M,
    max_num_seqs × per-prompt items): with max_num_seqs 4 and image limit 2 → min(31, 8) = 8
    items; held = 8 × 3,784,704 × 2 = 60,555,264 B."""
    p = plan(GEMMA, "h100", engine_version="0.19.0", max_num_seqs=4,
             limit_mm_per_prompt="image=2")
    assert p.multimodal.limit_per_prompt == 2 and p.multimodal.limit_source == "cli"
    assert p.multimodal.profile_items == 8
    assert p.multimodal.profile_bytes == 60_555_264


def test_llama4_scout_tp4_encoder_profile_hand_worked():
    """Llama-4-Scout, TP4 on H100 (0.19.0): M = 2467, E = 17 tiles × 144 = 2448 rows;
    items = min(8192 // 2467 = 3, 1024 × min(999, 131072... // 2467)) = 3; every TP rank holds
    the whole batch: held = 3 × (2448 × 5120 + 17 × 3 × 336²) × 2
    = 3 × (12,533,760 + 5,757,696) × 2 = 109,748,736 B."""
    p = plan(SCOUT, "h100", tensor_parallel_size=4, max_model_len=8192, engine_version="0.19.0")
    mm = p.multimodal
    assert (mm.max_tokens_per_item, mm.embeds_per_item, mm.profile_items) == (2467, 2448, 3)
    assert mm.profile_bytes == 109_748_736


def test_text_only_model_has_no_multimodal_section():
    p = plan(LLAMA, "h100", limit_mm_per_prompt='{"image": 4}')
    assert p.multimodal is None
    assert "--limit-mm-per-prompt" in p.command  # kept as given (vLLM ignores it there)
    p = plan(LLAMA, "h100", workload=Workload(images_per_request=2))
    assert "images-text-only-model" in {pr.code for pr in p.problems}


# -------------------------------------------------------------- images per request


def test_gemma3_concurrency_at_four_images_hand_worked():
    """4 images × 260 = 1040 image tokens + 1000 input + 500 output = 2540 tokens per request.
    Gemma-3-27B's 62 layers are 10 full-attention + 52 sliding (window 1024) layers, grouped by
    vLLM into 1 full + 6 sliding groups of 10 (8 padding layers). Blocks of 16 tokens per
    request (vllm/v1/kv_cache_interface.py: a sliding group holds min(W − 1 + in-flight
    tokens, L) tokens + 1 block; in-flight = max_num_batched_tokens = 8192 in 0.19):
        full     cdiv(2540, 16)                       = 159
        sliding  6 × (cdiv(min(1023 + 8192, 2540), 16) + 1) = 6 × 160 = 960
        total                                           = 1119 blocks
    concurrency = num_blocks / 1119."""
    w = Workload(images_per_request=4, avg_input_tokens=1000, avg_output_tokens=500)
    p = plan(GEMMA, "h100", engine_version="0.19.0", limit_mm_per_prompt='{"image": 4}', workload=w)
    mm = p.multimodal
    assert mm.images_per_request == 4 and mm.image_tokens_per_request == 1040
    assert mm.request_tokens == 2540
    assert mm.max_concurrency_with_images == round(p.kv_cache.num_blocks / 1119, 2)
    # the recommended --max-num-seqs counts the image tokens too
    assert "+ images" in p.recommendations.max_num_seqs.reason
    assert "--limit-mm-per-prompt '{\"image\":4}'" in p.command


def test_images_alone_and_the_warnings():
    """Without text lengths a request is its images: 2 × 260 = 520 tokens → 1 full group of
    cdiv(520, 16) = 33 blocks + 6 sliding groups of 33 + 1 = 34 → 237 blocks."""
    p = plan(GEMMA, "h100", engine_version="0.19.0", workload=Workload(images_per_request=2))
    assert p.multimodal.request_tokens == 520
    assert p.multimodal.max_concurrency_with_images == round(p.kv_cache.num_blocks / 237, 2)
    over = plan(GEMMA, "h100", engine_version="0.19.0", limit_mm_per_prompt="image=1",
                max_model_len=512, workload=Workload(images_per_request=2))
    codes = {pr.code for pr in over.problems}
    assert {"images-above-mm-limit", "images-exceed-max-model-len"} <= codes
    # vLLM refuses every such request (vllm/multimodal/processing.py): errors, as a text
    # request longer than the context is, so the plan exits 1 (they were warnings, exit 0)
    assert {pr.severity for pr in over.problems
            if pr.code.startswith("images-")} == {"error"}


def test_a_workload_of_refused_image_requests_exits_1(capsys):
    code, out, _ = run(capsys, "plan", GEMMA, "--gpu", "h100", "--engine-version", "0.19.0",
                       "--max-model-len", "512", "--images-per-request", "2", "--json")
    assert code == 1
    assert any(p["code"] == "images-exceed-max-model-len" and p["severity"] == "error"
               for p in json.loads(out)["problems"])


# ------------------------------------------------------------------------ the knob


@pytest.mark.parametrize("given, parsed", [
    ('{"image": 4, "video": 0}', {"image": 4, "video": 0}),
    ("image=4,video=1", {"image": 4, "video": 1}),
    (" image = 2 ", {"image": 2}),
    ('{"image": {"count": 5, "width": 512, "height": 512}}', {"image": 5}),
    ({"image": 3}, {"image": 3}),
    ("{}", {}),
])
def test_limit_forms(given, parsed):
    assert Knobs.parse({"limit_mm_per_prompt": given}).limit_mm_per_prompt == parsed


@pytest.mark.parametrize("bad", ["abc", "image=x", '{"image": -1}', '{"image": 1.5}', "[1]",
                                 '{"Image": 1}', "image=1,=2", '{"image": true}', "image"])
def test_limit_bad_values_name_the_flag(bad):
    with pytest.raises(InvalidInputError, match="--limit-mm-per-prompt must be JSON like"):
        Knobs.parse({"limit_mm_per_prompt": bad})


@pytest.mark.parametrize("engine", ["sglang", "tgi", "trtllm"])
def test_other_engines_refuse_the_limit(engine):
    with pytest.raises(InvalidInputError, match="not a setting"):
        plan(GEMMA, "h100", engine=engine, limit_mm_per_prompt='{"image": 1}')


def test_cli_json_and_exit_codes(capsys):
    code, out, _ = run(capsys, "plan", GEMMA, "--gpu", "h100", "--engine-version", "0.19.0",
                       "--limit-mm-per-prompt", "image=4", "--images-per-request", "4",
                       "--max-model-len", "32768", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["schema_version"] == "1.16"
    assert data["workload"]["images_per_request"] == 4
    assert data["multimodal"]["limit_per_prompt"] == 4
    assert data["multimodal"]["image_tokens_per_request"] == 1040
    assert data["multimodal"]["profile_bytes"] == 234_651_648
    code, out, err = run(capsys, "plan", GEMMA, "--gpu", "h100", "--limit-mm-per-prompt",
                         "image=lots", "--json")
    assert code == 2 and json.loads(out)["error"]["exit_code"] == 2  # --json: the error object
    assert "--limit-mm-per-prompt" in err and "Traceback" not in err
    code, out, err = run(capsys, "plan", GEMMA, "--gpu", "h100", "--images-per-request", "-1")
    assert code == 2 and "--images-per-request" in err


def test_table_says_images_and_concurrency(capsys):
    code, out, _ = run(capsys, "plan", GEMMA, "--gpu", "h100", "--max-model-len", "32768",
                       "--images-per-request", "4", "--avg-input-tokens", "1000")
    assert code == 0
    assert "of which image encoder" in out
    assert "images per prompt" in out and "999 × 260 tokens" in out
    assert "max concurrency, 4 image(s) + 1,000 text tokens per request" in out


# -------------------------------------------------------------------------- check


def test_check_reads_the_limit_from_a_serve_line(capsys, tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text(f"vllm serve {GEMMA} --max-model-len 32768 --limit-mm-per-prompt "
                 "'{\"image\": 0}'\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    p = row["plan"]
    assert p["multimodal"]["limit_per_prompt"] == 0 and p["multimodal"]["profile_bytes"] == 0
    assert not any(pr["code"] in ("flags-not-modelled", "mm-limit-unset") for pr in row["problems"])


def test_check_reads_the_limit_from_a_yaml_mapping(capsys, tmp_path):
    f = tmp_path / "vllm.yaml"
    f.write_text(textwrap.dedent(f"""\
        model: {GEMMA}
        max_model_len: 32768
        limit_mm_per_prompt:
          image: 2
          video: 0
    """))
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    p = json.loads(out)["deployments"][0]["plan"]
    assert p["multimodal"]["limit_per_prompt"] == 2
    assert '--limit-mm-per-prompt \'{"image":2,"video":0}\'' in p["command"]


def test_check_refuses_the_legacy_form_from_vllm_0_10(capsys, tmp_path):
    """vLLM 0.10.0 and later parse --limit-mm-per-prompt as JSON only (issue #21615); 0.8.5–0.9
    still took image=2 with a warning. The check says what to write instead."""
    f = tmp_path / "serve.sh"
    f.write_text(f"vllm serve {GEMMA} --max-model-len 32768 --limit-mm-per-prompt image=2\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert code == 2 and row["status"] == "error"
    legacy = [p for p in row["problems"] if p["code"] == "mm-limit-legacy-form"]
    assert legacy and "'{\"image\": 2}'" in legacy[0]["message"]
    old = tmp_path / "old.sh"
    old.write_text(f"pip install vllm==0.9.2\nvllm serve {GEMMA} --max-model-len 32768 "
                   "--limit-mm-per-prompt image=2\n")
    _, out, _ = run(capsys, "check", str(old), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert row["status"] == "fits" and row["plan"]["multimodal"]["limit_per_prompt"] == 2


@pytest.mark.parametrize(("version", "written"), [
    ("0.8.4", "--limit-mm-per-prompt image=2,video=0"),
    ("0.8.5", '--limit-mm-per-prompt \'{"image":2,"video":0}\''),
    ("0.19.0", '--limit-mm-per-prompt \'{"image":2,"video":0}\''),
])
def test_plan_writes_the_limit_in_the_form_the_release_parses(version, written):
    """vllm/engine/arg_utils.py: up to 0.8.4 the flag's type is nullable_kvs alone (KEY=VALUE
    pairs; JSON raises "Each item should be in the form KEY=VALUE"); JSON from 0.8.5."""
    p = plan(GEMMA, "h100", engine_version=version, limit_mm_per_prompt='{"image": 2, "video": 0}')
    assert written in p.command


def test_check_refuses_json_before_vllm_0_8_5(capsys, tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text(f"pip install vllm==0.8.4\nvllm serve {GEMMA} --max-model-len 32768 "
                 "--limit-mm-per-prompt '{\"image\": 2}'\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert code == 2 and row["status"] == "error"
    [message] = [p["message"] for p in row["problems"] if p["code"] == "mm-limit-json-form"]
    assert "vLLM 0.8.4 refuses the JSON form" in message and message.endswith("write image=2")
    for version, line in (("0.8.4", "--limit-mm-per-prompt image=2"),
                          ("0.8.5", "--limit-mm-per-prompt '{\"image\": 2}'")):
        f.write_text(f"pip install vllm=={version}\nvllm serve {GEMMA} --max-model-len 32768 "
                     f"{line}\n")
        _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
        row = json.loads(out)["deployments"][0]
        assert row["status"] == "fits" and row["plan"]["multimodal"]["limit_per_prompt"] == 2
        assert not [p for p in row["problems"] if p["code"].startswith("mm-limit-")]


def test_check_reads_the_dotted_form(capsys, tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text(f"vllm serve {GEMMA} --max-model-len 32768 --limit-mm-per-prompt.image 2 "
                 "--limit-mm-per-prompt.video=0\n")
    _, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert row["status"] == "fits"
    assert row["plan"]["multimodal"]["limit_per_prompt"] == 2
    assert not any(p["code"] in ("flags-not-modelled", "mm-limit-unset") for p in row["problems"])
    bad = tmp_path / "bad.sh"
    bad.write_text(f"vllm serve {GEMMA} --limit-mm-per-prompt.image lots\n")
    code, out, err = run(capsys, "check", str(bad), "--gpu", "h100")
    assert code == 2 and "--limit-mm-per-prompt.image 'lots'" in out + err


def test_images_on_an_engine_without_the_encoder_model_say_what_the_lengths_hold():
    """Qwen2.5-VL on SGLang (no multimodal section): the planner still adds the images to each
    request's length for --max-running-requests (planner._recommend: work_len += image_tokens),
    so the note must not claim the lengths exclude them. One image = Qwen2.5-VL's largest,
    max_pixels 12,845,056 → side isqrt = 3,584 (a multiple of 14 × 2 = 28) → (3,584 / 14)² / 2²
    = 65,536 / 4 = 16,384 tokens; 2 images + 500 + 100 text = 33,368 tokens per request."""
    p = plan("Qwen/Qwen2.5-VL-7B-Instruct", "h100", engine="sglang",
             workload=Workload(images_per_request=2, avg_input_tokens=500, avg_output_tokens=100))
    assert (
        "33368 tokens per request (input + output + images)"
        in p.recommendations.max_num_seqs.reason
    )
    note = next(pr for pr in p.problems if pr.code == "images-not-modelled")
    assert "exclude" not in note.message
    assert "16,384 tokens" in note.message


def test_latency_counts_the_images_in_each_prompt():
    """Images sit inside the prompt: 4 Gemma 3 images × (256 + 4 separator tokens) = 1,040
    tokens join 1,500 text tokens, so the latency model prefills 2,540 per request."""
    from kvplan.specs import Workload

    p = plan("google/gemma-3-27b-it", "h100", workload=Workload(
        avg_input_tokens=1500, avg_output_tokens=200, images_per_request=4))
    assert p.performance.input_tokens == 2540
