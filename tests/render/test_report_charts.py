"""The HTML report's charts say what they show (issue #21 item 8): throughput in tokens/s, the
latency charts stop at the max_num_seqs the serve command runs (queueing beyond it would dwarf
every point), scatter labels do not overlap, and the engines table fits the page."""

from __future__ import annotations

import re

import pytest

from kvplan.api import report as plan_report
from kvplan.render import report as rep
from kvplan.render import svg
from kvplan.specs import Workload


@pytest.fixture(scope="module")
def html() -> str:
    # a given max_num_seqs of 16 while the performance table runs to the KV bound of the
    # default 1,280-token requests (354)
    data = plan_report("llama-3.1-70b-instruct", "h100", tensor_parallel_size=4,
                       max_model_len=32768, max_num_seqs=16, workload=Workload(),
                       with_sweep=False)
    return rep.render_html(rep.for_model(data, command_line="kvplan report", version="0"))


def _chart(html: str, cid: str) -> str:
    start = html.index(f'aria-labelledby="{cid}-t')
    return html[start:html.index("</svg>", start)]


def test_throughput_axis_reads_tokens_per_second(html):
    assert "throughput (s)" not in html and "throughput (tokens/s)" in html


def test_latency_charts_stop_at_max_num_seqs_and_say_so(html):
    seqs = int(re.search(r"--max-num-seqs (\d+)", html).group(1))
    note = re.search(r"The charts show concurrencies up to ([\d,]+), the max_num_seqs the "
                     r"serve command runs \(their last point is at ([\d,]+)\)", html)
    assert note and int(note.group(1).replace(",", "")) == seqs
    ttft = _chart(html, "p0-0")
    xs = [float(x) for x in re.findall(r"<title>ttft_ms: ([\d.]+) →", ttft)]
    # the note names the last point drawn (the table's points are 1, 2, 4, 8, …, not seqs)
    assert xs and max(xs) <= seqs and max(xs) == int(note.group(2).replace(",", ""))
    # the data table still lists the points past it
    table = html[html.index("Latency and throughput"):]
    assert re.search(r"<td class=\"n\">(\d+)</td>", table) is not None
    assert max(int(c) for c in re.findall(r"<tr><td class=\"n\">(\d+)</td>", table)) > seqs


def test_scatter_labels_never_overlap():
    points = [(1.0 + i * 0.01, 10.0 + i * 0.02, f"option-{i} ×2", i == 0) for i in range(6)]
    chart = svg.scatter("s", points, title="t", desc="d", x_label="x", y_label="y",
                        x_fmt=str, y_fmt=str)
    boxes = []
    for x, y, label in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" font-size="11" '
                                  r'text-anchor="start" fill="#222">(option-[^<]*)</text>', chart):
        boxes.append((float(x), float(y) - 12, float(x) + 6.2 * len(label), float(y) + 2))
    assert len(boxes) == 6
    for i, a in enumerate(boxes):
        for b in boxes[:i]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)


def test_engines_table_wraps_instead_of_pushing_a_column_out_of_sight(html):
    start = html.index('id="cmp-h"')
    assert '<table class="wrap">' in html[start:html.index("</section>", start)]
    assert re.search(r"table\.wrap td\.n,table\.wrap th\.n\{white-space:normal", html)
