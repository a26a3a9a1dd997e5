"""`kvplan plan/sweep --emit FORMAT`: every format round-trips — plan → manifest → `kvplan check`
→ the same plan (property test over the catalogue) — and the compose file is valid against the
Compose Specification's published schema (tests/deploy/schemas/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import run
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvplan.api import plan
from kvplan.deploy.check import Policy, check_files
from kvplan.deploy.commands import load_yaml
from kvplan.deploy.emit import FORMATS, MULTINODE_FORMATS, emit, multinode_formats
from kvplan.engines.registry import NAMES
from kvplan.errors import KvplanError
from kvplan.sources.catalog import resolve_gpu, resolve_model

SCHEMAS = Path(__file__).parent / "schemas"
CATALOGUE = Path(__file__).resolve().parents[2] / "model_specs" / "index.json"
MODELS = sorted(m["id"] for m in json.loads(CATALOGUE.read_text())["models"])
GPUS = ("h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "l40s", "b200", "mi300x")
ENGINE_FORMATS = {  # the formats each engine can be deployed with (the rest say so: tested below)
    "vllm": FORMATS, "sglang": ("k8s", "compose", "skypilot", "dynamo"),
    "trtllm": ("k8s", "compose", "skypilot", "dynamo"), "tgi": ("k8s", "compose", "skypilot")}


def round_trip(p, fmt: str, tmp: Path):
    """The plan `kvplan check` makes of the file `--emit fmt` writes for `p`."""
    path = tmp / f"{fmt}.yaml"
    path.write_text(emit(p, fmt))
    report = check_files([path], policy=Policy(), sets={}, offline=True)
    assert len(report.deployments) == 1, [d.problems for d in report.deployments]
    row = report.deployments[0]
    assert row.plan is not None, (fmt, row.status, row.problems, path.read_text())
    return row


def assert_same_plan(p, q, fmt: str) -> None:
    assert (q.model.id, q.gpu.id, q.gpu.count) == (p.model.id, p.gpu.id, p.gpu.count), fmt
    assert (q.engine.name, q.engine.version) == (p.engine.name, p.engine.version), fmt
    # every input the plan reports, with the same value (a file that spells an engine default
    # out, TGI's --max-input-tokens, makes the check report that input too)
    assert set(p.inputs) <= set(q.inputs), fmt
    assert {k: q.inputs[k].value for k in p.inputs} == {k: v.value for k, v in p.inputs.items()}
    assert q.kv_cache.tokens == p.kv_cache.tokens and q.fits == p.fits, fmt


def fitting_plan(model: str, gpu: str, engine: str, **knobs):
    """A plan of `model` that fits: as asked, else at the tensor parallelism kvplan recommends;
    None when neither fits or the engine does not run the model."""
    m, g = resolve_model(model, offline=True), resolve_gpu(gpu)
    try:
        p = plan(m, g, engine=engine, **knobs)
        tp = p.recommendations.tensor_parallel_size.value
        if not p.fits and tp and tp != p.gpu.count:
            p = plan(m, g, engine=engine, **{**knobs, "tensor_parallel_size": int(tp)})
    except KvplanError:
        return None
    return p if p.fits and p.gpu.count <= 8 else None


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("model", "gpu", "knobs"), [
    ("Qwen/Qwen3-8B", "h100", {"tensor_parallel_size": 2, "max_model_len": 16384}),
    ("Qwen/Qwen3-30B-A3B", "h100", {"tensor_parallel_size": 2, "kv_cache_dtype": "fp8",
                                    "enable_expert_parallel": True}),
    ("meta-llama/Llama-3.1-8B-Instruct", "l40s", {"max_model_len": 8192, "max_num_seqs": 64,
                                                  "gpu_memory_utilization": 0.85}),
])
def test_emitted_file_checks_as_the_same_plan(fmt, model, gpu, knobs, tmp_path):
    p = plan(model, gpu, **knobs)
    assert p.fits
    assert_same_plan(p, round_trip(p, fmt, tmp_path).plan, fmt)


ROUND_TRIP_ENGINES = NAMES


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       engine=st.sampled_from(ROUND_TRIP_ENGINES), data=st.data())
def test_round_trip_over_the_catalogue(model, gpu, engine, data, tmp_path_factory):
    p = fitting_plan(model, gpu, engine)
    assume(p is not None)
    formats = [f for f in ENGINE_FORMATS.get(engine, ("k8s",))  # Dynamo runs no AMD GPU
               if f != "dynamo" or resolve_gpu(gpu).vendor == "NVIDIA"]
    fmt = data.draw(st.sampled_from(formats), label="format")
    tmp = tmp_path_factory.mktemp("emit")
    row = round_trip(p, fmt, tmp)
    assert row.status == "fits", row.problems
    # The file carries the plan's serve line (Plan.command), which is the plan's own inputs on
    # every engine (TGI's --max-total-tokens read back within the model's n_positions; TensorRT-
    # LLM's --kv_cache_free_gpu_memory_fraction the planned 0.9, not a lower recommendation).
    assert_same_plan(p, row.plan, fmt)


@pytest.mark.parametrize("fmt", ENGINE_FORMATS["tgi"])
def test_tgi_files_round_trip(fmt, tmp_path):
    p = fitting_plan("mistralai/Mistral-7B-Instruct-v0.3", "l4", "tgi")
    assert p is not None
    assert_same_plan(p, round_trip(p, fmt, tmp_path).plan, fmt)


@pytest.mark.parametrize(("engine", "fmt"), [(e, f) for e in ENGINE_FORMATS for f in FORMATS
                                             if f not in ENGINE_FORMATS[e]])
def test_a_format_that_cannot_run_the_engine_says_so(engine, fmt):
    p = fitting_plan("Qwen/Qwen3-8B", "h100", engine)
    assert p is not None
    with pytest.raises(KvplanError) as e:
        emit(p, fmt)
    assert "--engine" in (e.value.hint or "")


def test_compose_file_is_valid_against_the_compose_specification():
    import jsonschema

    schema = json.loads((SCHEMAS / "compose-spec.json").read_text())
    for model, gpu in (("Qwen/Qwen3-8B", "h100"), ("meta-llama/Llama-3.1-70B-Instruct", "h200")):
        p = fitting_plan(model, gpu, "vllm")
        jsonschema.validate(load_yaml(emit(p, "compose")), schema)
    with pytest.raises(jsonschema.ValidationError):  # the schema does refuse a wrong file
        jsonschema.validate({"services": {"x": {"gpus_please": 1}}}, schema)


def test_emitted_kubernetes_documents_have_their_required_fields():
    # apps/v1 Deployment needs spec.selector matching spec.template's labels; v1 Service ports
    p = plan("Qwen/Qwen3-8B", "h100")
    from kvplan.deploy.commands import _yaml_module

    deployment, service = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}  # nvidia-smi's name (gpu_specs)


def test_cli_plan_emit_to_file_and_stdout(capsys, tmp_path):
    out = tmp_path / "deploy.yaml"
    code, stdout, err = run(capsys, "plan", "Qwen/Qwen3-8B", "--gpu", "h100", "--emit", "dynamo",
                            "-o", str(out), "--offline")
    assert code == 0 and "wrote" in err and "DynamoGraphDeployment" in out.read_text()
    code, stdout, _ = run(capsys, "plan", "Qwen/Qwen3-8B", "--gpu", "h100", "--emit", "ray",
                          "--offline")
    assert code == 0 and load_yaml(stdout)["applications"][0]["args"]["llm_configs"]


def test_cli_bad_emit_format_and_output_without_emit_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "plan", "Qwen/Qwen3-8B", "--gpu", "h100", "--emit", "helm",
                       "--offline")
    assert code == 2 and "helm-llmd" in err and "Traceback" not in err
    code, _, err = run(capsys, "plan", "Qwen/Qwen3-8B", "--gpu", "h100", "-o",
                       str(tmp_path / "x.yaml"), "--offline")
    assert code == 2 and "--emit" in err


def test_cli_sweep_emit_option(capsys):
    code, stdout, _ = run(capsys, "sweep", "Qwen/Qwen3-8B", "--gpus", "h100,l40s",
                          "--max-model-len", "8192", "--emit", "k8s", "--option", "2",
                          "--offline")
    assert code == 0 and "kind: Deployment" in stdout
    code, _, err = run(capsys, "sweep", "Qwen/Qwen3-8B", "--gpus", "h100", "--max-model-len",
                       "8192", "--emit", "k8s", "--option", "999", "--offline")
    assert code == 2 and "--option 999" in err


@pytest.mark.parametrize("fmt", ENGINE_FORMATS["trtllm"])
def test_a_trtllm_options_file_travels_with_its_launch_line(fmt, tmp_path):
    """--kv-cache-dtype fp8 on TensorRT-LLM has no flag: the launch line writes
    extra_llm_api_options.yaml with a here-document first. The emitted file split that script
    into one container argv (`cat '>' … '<<EOF' kv_cache_config: …`: no command at all) and
    `kvplan check` could not read the options file; now the container runs the script with
    /bin/sh -c and check reads the here-document (KV dtype fp8 back)."""
    p = plan("Qwen/Qwen3-8B", "h100", engine="trtllm", kv_cache_dtype="fp8")
    assert "<<'EOF'" in p.command
    text = emit(p, fmt)
    if fmt in ("k8s", "compose"):
        assert "- /bin/sh" in text and "'>'" not in text
    if fmt == "dynamo":  # Dynamo's worker reads it as --extra-engine-args from a ConfigMap
        assert "kind: ConfigMap" in text and "--extra-engine-args" in text and "'>'" not in text
    q = round_trip(p, fmt, tmp_path).plan
    assert q.inputs["kv_cache_dtype"].value == "fp8"
    assert_same_plan(p, q, fmt)


@pytest.mark.parametrize(("engine", "spelled"), [("sglang", "fp8_e4m3"), ("tgi", "fp8_e4m3fn")])
def test_a_generic_fp8_kv_cache_is_what_the_launch_line_says(engine, spelled, tmp_path):
    """SGLang and TGI have no plain `fp8` KV dtype: the launch line says e4m3 in the engine's own
    spelling (SGLang server_args.py fp8_e4m3; TGI launcher/src/main.rs KVCacheDtype
    fp8_e4m3fn), the plan's inputs say fp8_e4m3, and check reads the same back (TGI's
    fp8_e4m3fn was refused as an unknown KV dtype)."""
    p = plan("Qwen/Qwen3-8B", "h100", engine=engine, kv_cache_dtype="fp8")
    assert f"--kv-cache-dtype {spelled}" in p.command
    assert p.inputs["kv_cache_dtype"].value == "fp8_e4m3"
    script = tmp_path / "serve.sh"
    script.write_text(f"# kvplan: gpu=h100\n{p.command}\n")
    (row,) = check_files([script], policy=Policy(), sets={}, offline=True).deployments
    assert row.plan is not None, row.problems
    assert_same_plan(p, row.plan, "script")


def test_gpt_j_on_tgi_reads_back_within_its_n_positions(tmp_path):
    """TGI's launcher takes the model's length from max_position_embeddings, else max_seq_len,
    else n_positions (launcher/src/main.rs v3.3.6, `impl From<RawConfig> for Config`); GPT-J's
    config gives only n_positions 2048. The plan wrote --max-total-tokens 127223 (the KV pool)
    and check refused it as above the model's 56348 (the prefill size)."""
    p = fitting_plan("EleutherAI/gpt-j-6b", "h100", "tgi")
    assert p is not None
    assert "--max-input-tokens 2047 --max-total-tokens 2048" in p.command
    assert_same_plan(p, round_trip(p, "k8s", tmp_path).plan, "k8s")


# ------------------------------------------------------------------ plans over several nodes

MULTINODE_PLANS = (  # whole 8-GPU nodes; DeepSeek-V3's two data-parallel ranks, one a node
    ("meta-llama/Llama-3.1-405B", "vllm", {"tensor_parallel_size": 8,
                                           "pipeline_parallel_size": 2, "nodes": 2}),
    ("meta-llama/Llama-3.1-405B", "vllm", {"tensor_parallel_size": 8, "pipeline_parallel_size": 2,
                                           "nodes": 2, "engine_version": "0.10.2"}),  # Ray
    ("meta-llama/Llama-3.1-405B", "sglang", {"tensor_parallel_size": 8,
                                             "pipeline_parallel_size": 4, "nodes": 4,
                                             "max_model_len": 8192}),
    ("meta-llama/Llama-3.1-405B", "trtllm", {"tensor_parallel_size": 8,
                                             "pipeline_parallel_size": 2, "nodes": 2}),
    ("deepseek-ai/DeepSeek-V3", "vllm", {"tensor_parallel_size": 8, "data_parallel_size": 4,
                                         "enable_expert_parallel": True, "max_model_len": 8192}),
    ("deepseek-ai/DeepSeek-V3", "sglang", {"tensor_parallel_size": 16}),
)


def assert_same_nodes(p, q, fmt: str) -> None:
    assert_same_plan(p, q, fmt)
    # a Ray Serve config names GPUs, not nodes: its `# kvplan: nodes=N` keeps the plan's count
    assert (q.nodes.nodes, q.nodes.gpus_per_node) == (p.nodes.nodes, p.nodes.gpus_per_node), fmt


@pytest.mark.parametrize(("model", "engine", "knobs"), MULTINODE_PLANS)
def test_multinode_plans_round_trip_in_every_format_that_can_write_them(model, engine, knobs,
                                                                         tmp_path):
    p = plan(model, "h100", engine=engine, **knobs)
    assert p.fits and p.nodes.nodes > 1
    formats = multinode_formats(p)
    # vLLM and SGLang have a launch line per node (LWS, SkyPilot); TensorRT-LLM's one mpirun
    # line starts every rank, which only Dynamo's operator sets up across pods
    assert ("k8s" in formats) == (engine != "trtllm") and "dynamo" in formats
    for fmt in formats:
        row = round_trip(p, fmt, tmp_path)
        assert row.status == "fits", (fmt, row.problems)
        assert_same_nodes(p, row.plan, fmt)
    for fmt in set(FORMATS) - set(formats):  # the rest refuse, naming those that can
        with pytest.raises(KvplanError) as e:
            emit(p, fmt)
        assert e.value.code in ("emit-multinode", "invalid-input"), fmt
        assert any(f in (e.value.hint or "") for f in formats), (fmt, e.value.hint)


def test_a_ray_app_over_two_nodes_reads_back_on_two_nodes_where_one_node_holds_them(tmp_path):
    """A100 has a 16-GPU HGX system: without the file's node count, `check` read a 2 × 8 Ray
    app back as one 16-GPU node (other links, other figures; found by the views-agree
    campaign, Yi-34B at TP 8 × PP 2)."""
    p = plan("01-ai/Yi-34B", "a100-sxm-80gb", tensor_parallel_size=8, pipeline_parallel_size=2,
             nodes=2, max_model_len=4096)
    assert (p.nodes.nodes, p.nodes.gpus_per_node) == (2, 8)
    assert "# kvplan: nodes=2\n" in emit(p, "ray")
    assert_same_nodes(p, round_trip(p, "ray", tmp_path).plan, "ray")


@pytest.mark.parametrize("value", ["0", "two", "99999"])
def test_a_nodes_directive_that_is_not_a_count_is_an_error_naming_it(capsys, tmp_path, value):
    f = tmp_path / "serve.sh"
    f.write_text(f"# kvplan: nodes={value}\nvllm serve qwen2.5-7b -tp 8 -pp 2\n")
    code, out, _ = run(capsys, "check", str(f), "--gpu", "h100", "--json")
    assert code == 2, out  # a file error, as every unreadable directive
    [row] = json.loads(out)["deployments"]
    assert "is not a number of nodes" in json.dumps(row) and "nodes=2" in json.dumps(row)


def test_a_multinode_k8s_file_is_a_leaderworkerset_with_the_per_node_lines():
    p = plan("meta-llama/Llama-3.1-405B", "h100", engine="sglang", tensor_parallel_size=8,
             pipeline_parallel_size=2, nodes=2)
    from kvplan.deploy.commands import _yaml_module

    lws, service = list(_yaml_module().safe_load_all(emit(p, "k8s")))
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    assert tmpl["size"] == 2
    leader = tmpl["leaderTemplate"]["spec"]["containers"][0]
    worker = tmpl["workerTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "8"
    # engines/multinode.py's lines, the head's address and the rank from LWS's variables
    # (the leader serves HTTP: SGLang binds 127.0.0.1 unless told, so --host 0.0.0.0)
    assert leader["command"][2].endswith(
        "--nnodes 2 --dist-init-addr $LWS_LEADER_ADDRESS:5000 --node-rank 0 --host 0.0.0.0")
    assert worker["command"][2].endswith("--node-rank 1")
    assert service["spec"]["selector"] == {"leaderworkerset.sigs.k8s.io/name": lws["metadata"][
        "name"], "role": "leader"}


def test_a_multinode_skypilot_task_reads_back_as_rank_zero(tmp_path):
    # both branches of the rank test hold a serve line; check plans the one rank 0 runs
    p = plan("meta-llama/Llama-3.1-405B", "h100", tensor_parallel_size=8,
             pipeline_parallel_size=2, nodes=2)
    text = emit(p, "skypilot")
    assert "num_nodes: 2" in text and "H100:8" in text and "--headless" in text
    row = round_trip(p, "skypilot", tmp_path)
    assert "--node-rank 0" in row.command and "--headless" not in row.command


def test_a_multinode_llmd_values_file_is_a_leaderworkerset_of_data_parallel_pods(tmp_path):
    # DeepSeek-V3, 16 data-parallel ranks with expert parallelism over two H200 nodes (llm-d's
    # wide-EP layout): the chart's LWS has data / dataLocal = 2 pods of 8 GPUs, one template,
    # whose script starts the head's line on the leader (LWS_WORKER_INDEX 0)
    p = plan("deepseek-ai/DeepSeek-V3", "h200", data_parallel_size=16,
             enable_expert_parallel=True, nodes=2)
    doc = load_yaml(emit(p, "helm-llmd"))
    assert doc["multinode"] is True
    decode = doc["decode"]
    assert decode["parallelism"] == {"tensor": 1, "data": 16, "dataLocal": 8, "workers": 2}
    (c,) = decode["containers"]
    assert c["modelCommand"] == "custom" and c["resources"]["limits"]["nvidia.com/gpu"] == "8"
    script = c["args"][0]
    assert script.startswith('if [ "$LWS_WORKER_INDEX" = "0" ]; then')
    assert "--data-parallel-address $LWS_LEADER_ADDRESS" in script
    assert "--headless --data-parallel-start-rank 8" in script
    row = round_trip(p, "helm-llmd", tmp_path)
    assert row.status == "fits", row.problems
    assert_same_nodes(p, row.plan, "helm-llmd")
    assert "--headless" not in row.command  # the leader's line was planned


def test_llmd_refuses_tensor_or_pipeline_parallelism_across_nodes():
    p = plan("meta-llama/Llama-3.1-405B", "h100", tensor_parallel_size=8,
             pipeline_parallel_size=2, nodes=2)
    assert "helm-llmd" not in multinode_formats(p)
    with pytest.raises(KvplanError) as e:
        emit(p, "helm-llmd")
    assert e.value.code == "emit-multinode" and "data-parallel" in str(e.value)
    assert "k8s" in (e.value.hint or "")


def fitting_multinode_plan(model: str, gpu: str, engine: str):
    """`model` over two whole 8-GPU nodes (TP 8 × PP 2), when it fits; else None."""
    try:
        p = plan(resolve_model(model, offline=True), resolve_gpu(gpu), engine=engine,
                 tensor_parallel_size=8, pipeline_parallel_size=2, nodes=2)
    except KvplanError:
        return None
    return p if p.fits and p.nodes is not None and p.nodes.nodes == 2 else None


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(("h100-sxm-80gb", "h200-sxm-141gb",
                                                          "a100-sxm-80gb", "b200")),
       engine=st.sampled_from(ROUND_TRIP_ENGINES), data=st.data())
def test_multinode_round_trip_over_the_catalogue(model, gpu, engine, data, tmp_path_factory):
    p = fitting_multinode_plan(model, gpu, engine)
    assume(p is not None)
    formats = multinode_formats(p)
    assume(formats)
    assert set(formats) <= set(MULTINODE_FORMATS)
    fmt = data.draw(st.sampled_from(formats), label="format")
    row = round_trip(p, fmt, tmp_path_factory.mktemp("emit"))
    assert row.status == "fits", row.problems
    assert_same_nodes(p, row.plan, fmt)


def test_cli_emits_a_two_node_skypilot_task_that_checks_on_two_nodes(capsys, tmp_path):
    # was refused (exit 2): the file wrote all 16 GPUs into one node, which `kvplan check`
    # planned on one 16-GPU HGX A100 node
    out = tmp_path / "task.yaml"
    code, _, err = run(capsys, "plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu",
                       "a100-sxm-80gb", "-tp", "8", "-pp", "2", "--nodes", "2",
                       "--max-model-len", "8192", "--emit", "skypilot", "-o", str(out),
                       "--offline")
    assert code == 0, err
    assert load_yaml(out.read_text())["num_nodes"] == 2
    code, stdout, _ = run(capsys, "check", str(out), "--json", "--offline")
    (row,) = json.loads(stdout)["deployments"]
    assert code == 0 and row["status"] == "fits"
    assert (row["plan"]["nodes"]["nodes"], row["plan"]["nodes"]["gpus_per_node"]) == (2, 8)


@pytest.mark.parametrize("fmt", ["k8s", "compose", "dynamo", "skypilot", "kserve", "helm-llmd"])
def test_emit_refuses_a_plan_whose_serve_line_runs_another_layout(capsys, fmt):
    """Llama-3.1-70B on one H100 does not fit; the plan's serve line moves to TP 4 while its GPUs
    are 1. Before 2026-12-03 --emit wrote that line with 1 GPU (a file `kvplan check` rejects:
    gpu-count-mismatch) or the failing TP-1 line; now it says what to emit instead."""
    from clirun import run

    code, out, err = run(capsys, "plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "h100",
                         "--emit", fmt)
    assert code == 2 and out == ""
    flat = " ".join(err.split())
    assert "do not fit at tensor_parallel_size 1 (the serve line moves to 4)" in flat
    assert "plan it at -tp 4 and emit that" in flat
