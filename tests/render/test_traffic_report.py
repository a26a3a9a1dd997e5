"""`kvplan report` with a rate and a rate curve: a traffic section in Markdown and HTML (the
percentiles, the replicas for the rate, GPUs per interval and the autoscaler values)."""

from __future__ import annotations

from kvplan.api import report as plan_report
from kvplan.planner.traffic import Demand
from kvplan.render import report as rep
from kvplan.specs import Workload

CURVE = ((0.0, 2.0), (6.0, 8.0), (12.0, 20.0), (18.0, 8.0))


def _report() -> rep.Report:
    w = Workload(avg_input_tokens=2000, avg_output_tokens=300, request_rate=20,
                 slo_ttft_ms=1000, slo_percentile=99)
    data = plan_report("llama-3.1-8b-instruct", "h100", workload=w, with_sweep=False,
                       demand=Demand(curve=CURVE))
    return rep.for_model(data, command_line="kvplan report …", version="0.1.0")


def test_markdown_and_html_carry_the_traffic_section() -> None:
    r = _report()
    plan = r.sections[0].plan
    assert plan.performance is not None and plan.performance.replicas
    assert plan.traffic is not None
    # only the reviewed deployment is simulated: the comparison plans carry no percentiles
    assert all(p.performance is None or p.performance.percentiles is None for p in r.compare)
    md = rep.render(r, "md")
    assert "Traffic: simulated percentiles" in md and "Traffic over the day" in md
    assert f"{plan.performance.replicas} replica" in md
    gpus = ", ".join(str(i.gpus) for i in plan.traffic.intervals)
    assert f"bar [{gpus}]" in md
    assert "vllm:num_requests_waiting" in md
    html = rep.render(r, "html")
    assert "Traffic over the day" in html and "GPUs per interval" in html
