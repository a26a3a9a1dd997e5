"""Work a sweep's caller does not ask for is not done: with a target, the fix-it alternatives
of a plan that misses it only fill a message (the serve line keeps its length), and a plan's
serve line is text nobody ranks on. Both are worked out when first read or serialized."""

import json
import pickle

import pytest

import kvplan
from kvplan.planner import plan as planner
from kvplan.specs import Problem, Workload

LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"
W = Workload(target_concurrency=40, avg_input_tokens=3000, avg_output_tokens=400)


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = planner._alternatives
    monkeypatch.setattr(planner, "_alternatives",
                        lambda *a, **k: calls.append(a[2].id) or real(*a, **k))
    return calls


def test_a_sweep_with_a_target_lists_no_alternatives_until_read(counted):
    r = kvplan.sweep(LLAMA70, gpus=["l40s", "h100", "a100-40gb"], workload=W,
                     max_model_len=32768, kv_cache_dtype="auto")
    assert counted == []
    missed = [o for o in r.options if any(p.code == "target-not-met" for p in o.plan.problems)]
    assert missed and counted == []  # codes and severities are known without the words
    o = missed[0]
    reason = o.reasons[0]
    assert len(counted) == 1
    message = next(p.message for p in o.plan.problems if p.code == "target-not-met")
    assert reason == f"memory: does not fit: {message}"
    assert "alternatives, cheapest first: 1) " in message
    assert len(counted) == 1  # worked out once, kept


def test_a_deferred_listing_reads_as_the_plan_alone_would_write_it(counted):
    """The sweep's option (its searches shared with the whole sweep) and `kvplan plan` of the
    same deployment print the same problems, once read."""
    r = kvplan.sweep(LLAMA70, gpus=["l40s"], workload=W, max_model_len=32768)
    o = next(o for o in r.options if not o.meets_target)
    alone = kvplan.plan(LLAMA70, "l40s", workload=W, max_model_len=32768,
                        tensor_parallel_size=o.tensor_parallel_size,
                        pipeline_parallel_size=o.pipeline_parallel_size
                        if o.pipeline_parallel_size > 1 else None)
    assert counted == []
    problems = json.loads(o.plan.model_dump_json())["problems"]
    assert problems == json.loads(alone.model_dump_json())["problems"]
    assert any(p["code"] == "target-not-met" for p in problems)
    assert list(json.loads(o.model_dump_json()))[:4] == ["rank", "meets_target", "reasons",
                                                         "pareto"]


def test_an_option_with_deferred_reasons_pickles_and_compares_with_them():
    a, b = (next(o for o in kvplan.sweep(LLAMA70, gpus=["l40s"], workload=W,
                                          max_model_len=32768, kv_cache_dtype="auto").options
                 if not o.meets_target) for _ in range(2))
    assert b.reasons  # worked out in b only
    assert a == b
    again = pickle.loads(pickle.dumps(a))
    assert again.reasons == b.reasons and again.model_dump_json() == b.model_dump_json()


def test_a_deferred_problem_is_worked_out_once_and_serialized_in_order():
    calls = []
    p = Problem.deferred(lambda: calls.append(1) or "the words", code="target-not-met",
                         severity="error")
    assert p.pending and p.code == "target-not-met" and calls == []
    assert json.loads(p.model_dump_json()) == {"code": "target-not-met", "severity": "error",
                                               "message": "the words"}
    assert p.message == "the words" and not p.pending and calls == [1]
    assert p == Problem(code="target-not-met", severity="error", message="the words")


def test_a_sweep_writes_no_serve_line_until_one_is_read(monkeypatch):
    calls = []
    real = planner._command
    monkeypatch.setattr(planner, "_command", lambda *a, **k: calls.append(1) or real(*a, **k))
    r = kvplan.sweep(LLAMA70, gpus=["h100", "l40s"], workload=W, max_model_len=32768,
                     max_gpus=4, kv_cache_dtype="auto")
    assert calls == []
    o = r.options[0]
    alone = kvplan.plan(LLAMA70, o.gpu, workload=W, max_model_len=32768,
                        tensor_parallel_size=o.tensor_parallel_size,
                        pipeline_parallel_size=o.pipeline_parallel_size
                        if o.pipeline_parallel_size > 1 else None)
    assert o.plan.command == alone.command and o.plan.command.startswith("vllm serve ")
    text = o.plan.model_dump_json()
    assert list(json.loads(text))[12:14] == ["command", "speculative"]  # in its place
    assert len(calls) == 2  # this option's, once, and the plan made alone


def test_a_plan_with_its_serve_line_not_yet_written_pickles_and_compares_with_it():
    a, b = (kvplan.sweep(LLAMA70, gpus=["h100"], workload=W, max_model_len=32768,
                         max_gpus=2).options[0].plan for _ in range(2))
    assert b.command  # written in b only
    assert a == b
    again = pickle.loads(pickle.dumps(a))
    assert again.command == b.command and again.model_dump_json() == b.model_dump_json()


def test_a_copy_that_sets_the_serve_line_keeps_it_in_its_place():
    p = kvplan.sweep(LLAMA70, gpus=["h100"], workload=W, max_model_len=32768,
                     max_gpus=2).options[0].plan
    q = p.model_copy(update={"command": "vllm serve x"})
    keys = list(json.loads(q.model_dump_json()))
    assert keys.index("command") == keys.index("performance") + 1 and q.command == "vllm serve x"


def test_a_multi_node_plan_writes_its_serve_line_once(monkeypatch):
    """Its nodes' launch lines quote the serve line, which the plan also keeps: written once
    for both (16 H100s: two 8-GPU nodes, one pipeline stage each)."""
    calls = []
    real = planner._command
    monkeypatch.setattr(planner, "_command", lambda *a, **k: calls.append(1) or real(*a, **k))
    p = kvplan.plan(LLAMA70, "h100", max_model_len=8192, tensor_parallel_size=8,
                    pipeline_parallel_size=2)
    assert p.nodes.nodes == 2 and p.nodes.launch
    assert len(calls) == 1
    assert p.command.startswith("vllm serve ")
    assert all(p.command in line.command for line in p.nodes.launch)


def test_a_plan_whose_serve_line_moves_to_another_tp_works_out_no_latency_section(monkeypatch):
    """Nothing fits at TP 1 (70B's 141 GB of weights on one 80 GB H100): the serve line moves
    to TP 4, whose figures would describe another deployment, so the plan has none, and none
    is worked out."""
    from kvplan.planner import performance

    calls = []
    real = performance.section
    monkeypatch.setattr(performance, "section", lambda *a, **k: calls.append(1) or real(*a, **k))
    p = kvplan.plan(LLAMA70, "h100", tensor_parallel_size=1, max_model_len=32768, workload=W)
    assert p.inputs["tensor_parallel_size"].value == 1
    assert p.recommendations.tensor_parallel_size.value == 4
    assert "--tensor-parallel-size 4 " in p.command
    assert "tensor-parallel-size-too-small" in [x.code for x in p.problems]
    assert p.performance is None and p.traffic is None
    assert calls == []
    moved = kvplan.plan(LLAMA70, "h100", tensor_parallel_size=4, max_model_len=32768,
                        workload=W)
    assert moved.performance is not None and len(calls) == 1  # planned itself, it has them


def test_a_sweep_lists_its_too_large_candidates_when_first_read(monkeypatch):
    """The result's pruned list ends with the candidates whose weights alone exceed the
    device: worked out when read (or serialized), in the order the sweep found them."""
    from kvplan.planner import sweep as sweeping
    calls = []
    real = sweeping._pruned_all
    monkeypatch.setattr(sweeping, "_pruned_all",
                        lambda kind, why: calls.append(kind) or real(kind, why))
    r = kvplan.sweep(LLAMA70, gpus=["l40s", "a100-40gb"], workload=W, max_model_len=32768)
    assert calls == [] and r.pending
    copy = pickle.loads(pickle.dumps(r))  # pickling works the list out
    assert calls == [sweeping.PrunedKind.MEMORY]
    memory = [p for p in r.pruned if p.kind is sweeping.PrunedKind.MEMORY]
    # 70B bf16 weights are about 141 GB: on one 48 GB L40S nothing else is needed to prune it
    one = next(p for p in memory if p.gpu == "l40s" and p.count == 1)
    assert one.reason.startswith("memory: the weights alone are ")
    assert one.reason.endswith("× the device (l40s)")
    assert r.pruned[-len(memory):] == memory and len(calls) == 1  # last, worked out once
    assert copy == r and json.loads(r.model_dump_json())["pruned"] == [
        json.loads(p.model_dump_json()) for p in r.pruned]


def test_rank_copies_the_options_unless_they_are_its_own():
    from kvplan.planner.sweep import rank
    r = kvplan.sweep(LLAMA70, gpus=["l40s", "h100"], workload=W, max_model_len=32768)
    given = list(reversed(r.options))
    before = [(o.rank, o.pareto) for o in given]
    copies = rank(given, True, "pessimistic")
    assert [(o.rank, o.pareto) for o in given] == before  # the inputs untouched
    assert not {id(o) for o in copies} & {id(o) for o in given}
    own = rank(given, True, "pessimistic", own=True)
    assert [id(o) for o in own] == [id(o) for o in r.options]  # the same objects, in rank order
    assert [(o.rank, o.pareto) for o in own] == [(o.rank, o.pareto) for o in copies]
