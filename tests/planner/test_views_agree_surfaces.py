"""Every view agrees, over the surfaces merged in round 4: one deployment through `kvplan plan`,
`compare` (its column), `sweep` (the option that is that layout), `report` (its plan and the
chosen sweep row), `check` (the plan's serve line read back) and `plan --emit` → `check` gives
the same figures, on every engine, for a MoE model with --enable-expert-parallel (and -dp), a
layout over two nodes (--nodes 2) and under a --calibration file (the same coefficients, named
the same, in every view). The quick cases are fixed; the property over random deployments is
@pytest.mark.fuzz (.ci/run's campaign)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from clirun import call
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvplan import api
from kvplan.deploy.emit import FORMATS
from kvplan.engines.registry import NAMES
from kvplan.errors import InvalidInputError
from kvplan.render import report as rep
from kvplan.sources.calibration import load

BENCH = Path(__file__).parents[1] / "sources" / "fixtures" / "bench"
L40S_RUNS = BENCH / "vllm_llama-3.2-3b_l40s_results.json"

# the CLI flag of each knob used below (plan's, report's and check's spelling)
FLAG = {"tensor_parallel_size": "-tp", "pipeline_parallel_size": "-pp",
        "data_parallel_size": "-dp", "max_model_len": "--max-model-len",
        "kv_cache_dtype": "--kv-cache-dtype", "enable_expert_parallel": "--enable-expert-parallel",
        "enable_dp_attention": "--enable-dp-attention", "nodes": "--nodes",
        "enable_mixed_chunk": "--enable-mixed-chunk"}
# compare takes the engine-generic knobs only (api.COMPARE_KNOBS)
COMPARE_KNOBS = {"tensor_parallel_size", "max_model_len", "kv_cache_dtype"}
# the first format each engine can be deployed with that is not plain Kubernetes (k8s is the
# check's own reader of a Deployment; the others go through the manifest readers)
EMIT = {"vllm": ("k8s", "dynamo"), "sglang": ("compose", "dynamo"),
        "trtllm": ("skypilot", "dynamo"), "tgi": ("k8s", "compose")}


@dataclass(frozen=True)
class Case:
    model: str
    gpu: str
    engine: str
    knobs: dict[str, Any]
    calibrated: bool = False
    max_gpus: int = field(default=0)  # the sweep's --max-gpus (0: the layout's GPU count)

    def args(self) -> list[str]:
        out = ["--engine", self.engine]
        for k, v in self.knobs.items():
            if v is True:
                out.append(FLAG[k])
            elif v is not None:
                out += [FLAG[k], str(v)]
        return out

    @property
    def count(self) -> int:
        k = self.knobs
        return (k.get("tensor_parallel_size", 1) * k.get("pipeline_parallel_size", 1)
                * k.get("data_parallel_size", 1))

    @property
    def sweepable(self) -> bool:
        """The sweep explores TP × PP (not DP); EP and the node count are fixed knobs it keeps
        (nodes: the fewest, which is what --nodes 2 asks of a 16-GPU layout of 8-GPU nodes)."""
        return "data_parallel_size" not in self.knobs


ENGINE_CASES = [Case("Qwen/Qwen3-8B", "h100", e, {"tensor_parallel_size": 2,
                                                  "max_model_len": 16384}) for e in NAMES]
MOE = "Qwen/Qwen3-30B-A3B"
MOE_CASES = [
    *(Case(MOE, "h100", e, {"tensor_parallel_size": 2, "max_model_len": 16384,
                            "enable_expert_parallel": True}) for e in ("vllm", "sglang", "trtllm")),
    Case(MOE, "h100", "vllm", {"tensor_parallel_size": 2, "data_parallel_size": 2,
                               "max_model_len": 16384, "enable_expert_parallel": True}),
    Case(MOE, "h100", "sglang", {"tensor_parallel_size": 2, "data_parallel_size": 2,
                                 "max_model_len": 16384, "enable_expert_parallel": True,
                                 "enable_dp_attention": True}),
]
NODE_CASES = [Case("meta-llama/Llama-3.1-70B-Instruct", "h100", e,
                   {"tensor_parallel_size": 8, "pipeline_parallel_size": 2, "nodes": 2,
                    "max_model_len": 16384}) for e in ("vllm", "sglang")]
# SGLang starts with a KV pool shorter than the context length (it caps each request: a warning,
# the plan fits): Qwen2.5-7B at its 32,768 tokens on one L4 holds fewer; every view says fits
CAPPED_CASES = [Case("Qwen/Qwen2.5-7B-Instruct", "l4", "sglang",
                     {"tensor_parallel_size": 1, "max_model_len": 32768})]
# SGLang's own batching flag (docs/sglang-mixed-chunk.md): every view plans it mixed, and the
# serve line that check reads back keeps it
MIXED_CHUNK_CASES = [Case("Qwen/Qwen3-8B", "h100", "sglang",
                          {"tensor_parallel_size": 2, "max_model_len": 16384,
                           "enable_mixed_chunk": True})]
# a checkpoint format SGLang's kernels do not run on Hopper (NVFP4 needs 10.0): the plan is a
# gpu-capability error, the sweep refuses the GPU as an unsupported format (found by the campaign)
REFUSED_FORMAT_CASES = [Case("nvidia/DeepSeek-V3.1-NVFP4", "h100", "sglang",
                             {"tensor_parallel_size": 1, "max_model_len": 4096})]
CALIBRATED = [Case("meta-llama/Llama-3.1-8B-Instruct", "l40s", "vllm",
                   {"tensor_parallel_size": 1, "max_model_len": 8192}, calibrated=True)]


@pytest.fixture(scope="module")
def cal_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A calibration file `kvplan calibrate` fits on a public L40S vLLM result file (Ada)."""
    path = tmp_path_factory.mktemp("cal") / "l40s.cal.json"
    code, _, err = call("calibrate", str(L40S_RUNS), "--max-model-len", "4096",
                        "--no-leave-one-out", "-o", str(path))
    assert code == 0, err
    return path


@contextlib.contextmanager
def calibration(path: Path | None) -> Iterator[None]:
    """The library under the same file --calibration puts in force on the command line."""
    if path is None:
        yield
        return
    from kvplan.perf.user_calibration import user_calibrations

    with user_calibrations(load(path)):
        yield


def cli_json(*args: str, refused: bool = False) -> dict[str, Any]:
    """The JSON a command prints; `refused`: exit 2 (an input some engine refuses) allowed."""
    code, out, err = call(*args, "--offline", "--json")
    assert code in ((0, 1, 2) if refused else (0, 1)), (args, code, err)
    return json.loads(out)


def figures(p: dict[str, Any]) -> dict[str, Any]:
    """What a view prints of one deployment: layout, inputs, KV cache, the serve line, the
    nodes and the performance figures with the coefficients that made them."""
    perf = p["performance"] or {}
    return {"gpu": (p["gpu"]["id"], p["gpu"]["count"]), "engine": p["engine"],
            "fits": p["fits"], "inputs": {k: v["value"] for k, v in p["inputs"].items()},
            "kv_cache": p["kv_cache"], "command": p["command"], "nodes": p["nodes"],
            "memory": p["memory"],
            "performance": {k: perf.get(k) for k in ("ttft_ms", "tpot_ms", "output_tokens_per_s",
                                                     "concurrency", "calibration", "calibrated")}}


def read_back(p: dict[str, Any]) -> dict[str, Any]:
    """figures() of what `check` reads back: every input the plan states, with its value (a
    line may spell out an engine default, so check can state more)."""
    f = figures(p)
    return {**f, "inputs": f["inputs"]}


def assert_read_back(want: dict[str, Any], got: dict[str, Any], where: str) -> None:
    assert set(want["inputs"]) <= set(got["inputs"]), where
    assert {k: got["inputs"][k] for k in want["inputs"]} == want["inputs"], where
    for key in ("gpu", "engine", "fits", "kv_cache", "command", "nodes", "performance"):
        assert got[key] == want[key], (where, key)


def check_file(path: Path, gpu: str, cal: Path | None) -> dict[str, Any]:
    data = cli_json("check", str(path), "--gpu", gpu,
                    *(["--calibration", str(cal)] if cal else []))
    (row,) = data["deployments"]
    assert row["plan"] is not None, (row["status"], row["problems"], path.read_text())
    return figures(row["plan"])


def assert_every_view_agrees(case: Case, tmp: Path, cal: Path | None,
                             emit_formats: tuple[str, ...]) -> None:
    cal_args = ["--calibration", str(cal)] if cal else []
    base = [case.model, "--gpu", case.gpu, *case.args(), *cal_args]
    plan_json = cli_json("plan", *base)
    want = figures(plan_json)
    if cal is not None and (case.gpu, case.engine) == ("l40s", "vllm") and want["fits"]:
        # (the file covers Ada × vLLM; a plan that does not fit has no performance)
        assert want["performance"]["calibration"] == f"user file {cal.name}"

    # the library's plan (the object the other views are built from)
    with calibration(cal):
        lib = api.plan(case.model, case.gpu, engine=case.engine, offline=True, **case.knobs)
    assert figures(json.loads(lib.model_dump_json())) == want

    # compare: the engine's column, when the deployment is one compare can state
    if set(case.knobs) <= COMPARE_KNOBS:
        gen = [a for k, v in case.knobs.items() for a in (FLAG[k], str(v))]
        # (another engine refusing the knobs, e.g. a length above the model's, refuses compare)
        cmp_json = cli_json("compare", case.model, "--gpu", case.gpu, *gen, *cal_args,
                            refused=True)
        if "plans" in cmp_json:
            column = next(p for p in cmp_json["plans"] if p["engine"]["name"] == case.engine)
            assert figures(column) == want

    # sweep: the option with this layout (it places a layout on the fewest nodes: compared when
    # --nodes asks for that many, as two 8-GPU DGX H100 nodes for 16 GPUs; A100 also ships in
    # 16-GPU HGX nodes, where the sweep's option is one node)
    fewest = case.knobs.get("nodes") is None or lib.nodes is None or want["nodes"]["nodes"] == (
        api.plan(case.model, case.gpu, engine=case.engine, offline=True,
                 **{k: v for k, v in case.knobs.items() if k != "nodes"}).nodes or lib.nodes).nodes
    # a checkpoint format the engine's kernels do not run on this GPU (Engine.checkpoint_kernels):
    # the plan is a gpu-capability error, and the sweep lists the GPU as an unsupported format,
    # so with this GPU alone it has nothing to plan; both views refuse it
    refused_format = [p["message"] for p in plan_json["problems"]
                      if p["code"] == "gpu-capability" and "kernels need" in p["message"]]
    if case.sweepable and fewest and refused_format:
        with pytest.raises(InvalidInputError, match="unsupported format"), calibration(cal):
            api.sweep(case.model, gpus=[case.gpu], engine=case.engine, offline=True,
                      max_gpus=case.max_gpus or case.count)
    elif case.sweepable and fewest:
        tp = case.knobs.get("tensor_parallel_size", 1)
        pp = case.knobs.get("pipeline_parallel_size", 1)
        fixed = {k: v for k, v in case.knobs.items()
                 if k not in ("tensor_parallel_size", "pipeline_parallel_size", "nodes",
                              "kv_cache_dtype")}
        with calibration(cal):
            r = api.sweep(case.model, gpus=[case.gpu], engine=case.engine, offline=True,
                          max_gpus=case.max_gpus or case.count,
                          kv_cache_dtype=[case.knobs.get("kv_cache_dtype")], **fixed)
        o = next(o for o in r.options if (o.tensor_parallel_size, o.pipeline_parallel_size)
                 == (tp, pp) and o.quantization is None)
        assert figures(json.loads(o.plan.model_dump_json())) == want
        if want["performance"]["ttft_ms"] is not None:
            assert (o.ttft_ms, o.tpot_ms) == (want["performance"]["ttft_ms"],
                                              want["performance"]["tpot_ms"])

    # report: its plan, and its sweep's chosen row is that plan
    with calibration(cal):
        data = api.report(case.model, case.gpu, engine=case.engine, offline=True,
                          with_sweep=case.sweepable, **case.knobs)
    assert figures(json.loads(data.plan.model_dump_json())) == want
    if data.sweep is not None:
        rows = [x for x in rep.for_model(data, command_line="x", version="0").sweep or ()
                if x.chosen]
        assert [(x.kv_tokens, x.command) for x in rows] == [
            (want["kv_cache"]["tokens"], want["command"])]

    if not want["fits"]:  # its serve line is kvplan's recommended deployment, not this one
        return
    # check: the serve line read back (over nodes: the head node's line, which says how many)
    nodes = (want["nodes"] or {}).get("nodes") or 1
    line = want["nodes"]["launch"][0]["command"] if nodes > 1 else want["command"]
    script = tmp / f"{case.engine}.sh"
    script.write_text(f"# kvplan: gpu={case.gpu}\n{line}\n")
    assert_read_back(want, check_file(script, case.gpu, cal), "serve line")

    # --emit → check (over nodes: the formats that write a multi-node deployment, for the
    # NODE_CASES' engines, which have a launch line per node; the others refuse, exit 2)
    from kvplan.deploy.emit import multinode_formats

    for fmt in emit_formats:
        # (the formats that write this plan over its nodes: helm-llmd and kserve spread nodes by
        # data-parallel ranks only, and refuse TP or PP across nodes)
        if nodes > 1 and fmt not in multinode_formats(lib):
            code, _, err = call("plan", *base, "--offline", "--emit", fmt)
            assert code == 2 and "nodes" in err and "Traceback" not in err, err
            continue
        out = tmp / f"{case.engine}-{fmt}.yaml"
        code, _, err = call("plan", *base, "--offline", "--emit", fmt, "-o", str(out))
        assert code == 0, err
        assert_read_back(want, check_file(out, case.gpu, cal), fmt)


@pytest.mark.parametrize("case", ENGINE_CASES + MOE_CASES + NODE_CASES + CAPPED_CASES
                         + MIXED_CHUNK_CASES + REFUSED_FORMAT_CASES,
                         ids=lambda c: f"{c.engine}-{c.model.split('/')[1]}-"
                         + "-".join(f"{k}={v}" for k, v in c.knobs.items()
                                    if k != "max_model_len"))
def test_every_view_of_one_deployment_agrees(case, tmp_path):
    assert_every_view_agrees(case, tmp_path, None, EMIT[case.engine][:1])
    if case in CAPPED_CASES:
        p = api.plan(case.model, case.gpu, engine=case.engine, offline=True, **case.knobs)
        assert p.fits and p.kv_cache.tokens < case.knobs["max_model_len"]


@pytest.mark.parametrize("case", CALIBRATED, ids=["vllm-l40s-calibrated"])
def test_every_view_agrees_under_a_calibration_file(case, cal_file, tmp_path):
    assert_every_view_agrees(case, tmp_path, cal_file, ("k8s",))


def test_a_disaggregated_sweep_option_is_plan_disagg_of_it():
    """`sweep --disagg`'s disaggregated options are the services `plan --disagg` plans at their
    pool layouts and formats (both pools, replicas, transfer, service figures, launch lines)."""
    sweep_json = cli_json("sweep", "Qwen/Qwen3-8B", "--gpus", "h100", "--max-gpus", "2",
                          "--max-model-len", "4096", "--disagg")
    options = [o for o in sweep_json["options"] if o["disaggregated"]]
    assert options
    for o in options:
        d = o["service"]["disaggregated"]
        tp = [str(d[pool]["inputs"]["tensor_parallel_size"]["value"])
              for pool in ("prefill", "decode")]
        formats = [a for flag, v in (("--quantization", o["quantization"]),
                                     ("--kv-cache-dtype", o["kv_cache_dtype"])) if v
                   for a in (flag, v)]
        want = cli_json("plan", "Qwen/Qwen3-8B", "--gpu", "h100", "--max-model-len", "4096",
                        "--disagg", "--prefill-tp", tp[0], "--decode-tp", tp[1], *formats)
        # the layouts the sweep chose carry a note naming every candidate TP (given, none)
        # and none beyond --max-gpus 2
        got = o["service"]
        notes = got["disaggregated"]["notes"]
        chose = [n for n in notes if n.startswith("decode layout TP ")]
        assert len(chose) == 1 and "TP 4" not in chose[0], chose
        got["disaggregated"]["notes"] = [n for n in notes if n not in chose]
        assert got == want, o["rank"]


# ---------------------------------------------------------------- property (fuzz campaign)

CATALOGUE = Path(__file__).resolve().parents[2] / "model_specs" / "index.json"
MODELS = tuple(sorted(m["id"] for m in json.loads(CATALOGUE.read_text())["models"]))
GPUS = ("h100", "h200", "a100-sxm-80gb", "l40s", "b200")


@pytest.mark.fuzz
@settings(max_examples=max(5, settings().max_examples // 26), deadline=None,  # campaign: 200
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       engine=st.sampled_from(NAMES), tp=st.sampled_from([1, 2, 4, 8]),
       length=st.sampled_from([4096, 8192, 16384]), kv=st.sampled_from([None, "fp8"]),
       ep=st.booleans(), two_nodes=st.booleans(), calibrated=st.booleans(),
       mixed=st.booleans(), data=st.data())
def test_every_view_agrees_over_random_deployments(model, gpu, engine, tp, length, kv, ep,
                                                   two_nodes, calibrated, mixed, data, cal_file,
                                                   tmp_path_factory):
    """Catalogue models on five GPUs and every engine; expert parallelism where the model has
    experts, two nodes of TP 8 × PP 2 where the engine pipelines, SGLang's mixed chunks."""
    knobs: dict[str, Any] = {"tensor_parallel_size": tp, "max_model_len": length}
    if kv:
        knobs["kv_cache_dtype"] = kv
    if ep and engine != "tgi":
        knobs["enable_expert_parallel"] = True
    if two_nodes and tp == 8 and engine in ("vllm", "sglang"):
        knobs.update(pipeline_parallel_size=2, nodes=2)
    if mixed and engine == "sglang":
        knobs["enable_mixed_chunk"] = True
    case = Case(model, gpu, engine, knobs, calibrated=calibrated)
    try:
        api.plan(model, gpu, engine=engine, offline=True, **knobs)
    except Exception:  # a combination the engine refuses: every view refuses it alike
        assume(False)
    fmt = data.draw(st.sampled_from([f for f in FORMATS if f in _formats(engine)]), label="fmt")
    assert_every_view_agrees(case, tmp_path_factory.mktemp("views"),
                             cal_file if calibrated else None, (fmt,))


def _formats(engine: str) -> tuple[str, ...]:
    return FORMATS if engine == "vllm" else (
        ("k8s", "compose", "skypilot") if engine == "tgi" else
        ("k8s", "compose", "skypilot", "dynamo"))
