"""`kvplan report`: the facts it shows are the plan's, Markdown is valid GFM, HTML is one
self-contained accessible file that a real headless browser renders without errors or network
requests, output is byte-identical for the same inputs, bad input exits 2 naming the path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from clirun import run

from kvplan.api import plan
from kvplan.api import report as plan_report
from kvplan.planner.curve import kv_curve, linear_kv
from kvplan.render import report as rep
from kvplan.render import svg
from kvplan.specs import Plan, Workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deploy"
ARGS = ("llama-3.1-70b-instruct", "--gpu", "h100", "-tp", "4", "--max-model-len", "32768",
        "--target-concurrency", "32", "--avg-input-tokens", "2000", "--avg-output-tokens", "500")
W32 = Workload(target_concurrency=32, avg_input_tokens=2000, avg_output_tokens=500)


@pytest.fixture(scope="module")
def p70() -> Plan:
    return plan("llama-3.1-70b-instruct", "h100", tensor_parallel_size=4, max_model_len=32768,
                workload=W32)


@pytest.fixture(scope="module")
def report70(p70) -> rep.Report:
    data = plan_report("llama-3.1-70b-instruct", "h100", tensor_parallel_size=4,
                       max_model_len=32768, workload=W32, with_sweep=False)
    return rep.for_model(data, command_line="kvplan report " + " ".join(ARGS), version="0.1.0")


# ---------------------------------------------------------------- render/svg.py


def test_svg_charts_are_accessible_images_with_labelled_axes():
    bar = svg.stacked_bar("m", [svg.Segment("weights", 30, svg.OKABE_ITO[0]),
                                svg.Segment("head<room>", 10, svg.GREY, pattern=True)],
                          title="Memory", desc="weights 30; headroom 10", axis_label="GiB per GPU",
                          fmt=lambda v: f"{v:g} GiB")
    assert bar.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img"')
    assert 'aria-labelledby="m-t m-d"' in bar and '<title id="m-t">Memory</title>' in bar
    assert '<desc id="m-d">' in bar and "GiB per GPU" in bar
    assert "head&lt;room&gt; 10 GiB" in bar  # labels escaped, values in the legend
    assert "url(#m-hatch)" in bar  # headroom reads without colour
    def line() -> str:
        return svg.line_chart("c", [svg.Series("s", [(1024, 100.0), (32768, 3.1)])], title="t",
                              desc="d", x_label="length (tokens)", y_label="requests", x_fmt=str,
                              y_fmt=str, log2_x=True, log2_y=True, marker=(32768, 3.1, "chosen"),
                              hlines=[svg.HLine(1, "1 request")])

    out = line()
    assert "length (tokens)" in out and "requests" in out and "chosen" in out
    assert out == line()  # deterministic


def test_log_axis_keeps_a_reference_line_at_one_inside_the_plot():
    out = svg.line_chart("c", [svg.Series("s", [(2**k, 2.0 ** (20 - k)) for k in range(10, 18)])],
                         title="t", desc="d", x_label="x", y_label="y", x_fmt=str,
                         y_fmt=lambda v: f"{v:g}", log2_x=True, log2_y=True,
                         hlines=[svg.HLine(1, "1 request")])
    ticks = re.findall(r'text-anchor="end" fill="#555">([^<]+)</text>', out)
    assert ticks[0] == "1" and float(ticks[-1]) >= 1024 and len(ticks) <= 9


def test_nice_ticks_cover_the_range():
    assert svg.nice_ticks(0, 441.86) == [0, 100, 200, 300, 400, 500]
    assert svg.nice_ticks(0, 1)[-1] >= 1


# ------------------------------------------------------------ facts are the plan's


def test_memory_stack_adds_up_to_the_device_total(p70):
    stack = rep.memory_stack(p70)
    assert [k for k, _, _ in stack] == ["weights", "activation", "non_torch", "cudagraph", "kv",
                                        "headroom"]
    assert sum(b for _, _, b in stack) == p70.memory.total_bytes
    assert dict((k, b) for k, _, b in stack)["kv"] == p70.memory.kv_cache_bytes


def test_curve_at_the_chosen_length_is_the_plans_max_concurrency(p70):
    curve, how = kv_curve(p70)
    chosen = [c for c in curve if c.chosen]
    assert len(chosen) == 1 and chosen[0].max_model_len == 32768
    assert chosen[0].concurrency == p70.kv_cache.max_concurrency
    assert curve[-1].max_model_len == p70.kv_cache.max_model_len_fit
    assert all(a.concurrency > b.concurrency for a, b in zip(curve, curve[1:], strict=False))
    assert f"{p70.kv_cache.num_blocks:,} KV blocks" in how  # the sentence quotes the plan


def test_a_sliding_window_model_takes_curve_points_from_the_planner():
    from kvplan.sources.catalog import resolve_gpu, resolve_model

    m, g = resolve_model("gemma-3-27b-it"), resolve_gpu("h100")
    r = rep.for_model(plan_report(m, g, max_model_len=32768, with_sweep=False),
                      command_line="x", version="0")
    p = r.sections[0].plan
    assert not linear_kv(p)
    assert "re-run at each length" in r.sections[0].curve_source
    by_len = {c.max_model_len: c.concurrency for c in r.sections[0].curve}
    assert by_len[32768] == p.kv_cache.max_concurrency
    other = plan(m, g, max_model_len=8192)
    assert by_len[8192] == round(other.kv_cache.max_concurrency, 2)


def test_the_renderer_lays_out_what_the_api_planned():
    """api.report plans (the deployment, every engine, the sweep); for_model only places it:
    the same Plan objects, one sweep row marked as the reviewed deployment, a note per engine
    that could not be planned."""
    data = plan_report("llama-3.1-8b", "l40s", max_model_len=8192, workload=Workload(
        target_concurrency=16))
    r = rep.for_model(data, command_line="x", version="0")
    assert r.sections[0].plan is data.plan and r.compare == data.compare
    assert data.sweep is not None and r.sweep is not None and len(r.sweep) >= 1
    chosen = [o for o in r.sweep if o.chosen]
    p = data.plan
    assert len(chosen) == 1 and chosen[0].label.startswith(f"{p.gpu.count} × {p.gpu.id} TP")
    assert chosen[0].label.endswith(f" {p.engine.name}")
    assert r.notes == tuple(f"{e}: not planned ({why})" for e, why in data.not_planned)
    assert r.exit_code == (0 if data.plan.fits else 1)


def test_the_report_compares_every_registry_engine(report70):
    from kvplan.engines.registry import NAMES

    assert [p.engine.name for p in report70.compare] == list(NAMES)


def test_a_deployment_that_does_not_fit_says_by_how_much_and_marks_the_device_total():
    p = plan("llama-3.1-70b-instruct", "h100", max_model_len=32768)
    assert not p.fits and p.memory.kv_cache_bytes == 0 < p.memory.kv_shortfall_bytes
    r = rep.Report(title="t", command_line="c", version="0", sections=(rep.section_for(p),))
    html, md = rep.render_html(r), rep.render_markdown(r)
    short = rep.gib(p.memory.kv_shortfall_bytes)
    assert f"falls {short} per GPU short" in md and f"none ({short} short)" in html
    assert "the recommended command uses tensor_parallel_size 4" in md
    assert f"device total {rep.gib(p.memory.total_bytes)}" in html  # the overflow line
    assert "No KV cache: the deployment does not fit." in html


def test_a_check_report_lists_what_it_could_not_plan(tmp_path):
    from kvplan.deploy.check import Policy, check_files

    (tmp_path / "good.sh").write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct\n")
    (tmp_path / "bad.sh").write_text("vllm serve nobody/no-such-model-xyz\n")
    checked = check_files([tmp_path], policy=Policy(gpu="h100"), sets={}, offline=True)
    r = rep.from_check(checked, command_line="kvplan report x", version="0")
    assert len(r.sections) == 1 and len(r.unplanned) == 1
    md = rep.render_markdown(r)
    assert r.unplanned[0].where.endswith("bad.sh:1") and "bad.sh:1" in md and "| error |" in md


# --------------------------------------------------------------------- Markdown


def _gfm(text: str):
    from markdown_it import MarkdownIt

    return MarkdownIt("gfm-like").parse(text)


def test_markdown_is_valid_gfm_with_tables_mermaid_and_no_raw_html(report70, p70):
    md = rep.render_markdown(report70)
    tokens = _gfm(md)
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    # every table row has as many cells as its header (GFM drops or pads otherwise)
    tables, cols, row = 0, 0, 0
    for t in tokens:
        if t.type == "table_open":
            tables += 1
        elif t.type == "tr_open":
            row = 0
        elif t.type in ("th_open", "td_open"):
            row += 1
        elif t.type == "tr_close":
            cols = cols or row
            assert row == cols
        elif t.type == "table_close":
            cols = 0
    assert tables >= 6
    fences = [t for t in tokens if t.type == "fence"]
    assert [f.info for f in fences if f.info == "mermaid"] == ["mermaid", "mermaid"]
    assert fences[0].info == "sh" and fences[0].content.strip() == p70.command
    assert fences[-1].content.strip().startswith("kvplan report llama-3.1-70b-instruct")
    heads = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert heads.index("Recommendations") < heads.index("Memory per GPU") \
        < heads.index("KV capacity versus max_model_len") < heads.index("Engines compared")
    assert "Options from a sweep" not in heads  # no sweep passed in
    assert "Latency and throughput versus concurrency" in heads  # the plan has performance
    assert md.index("**Verdict: FITS**") < md.index("Memory per GPU")
    assert f"{p70.kv_cache.tokens:,} tokens" in md and f"{p70.kv_cache.max_concurrency:.2f}" in md


def test_markdown_escapes_cells_that_would_break_a_table():
    assert rep._md("a|b <script> *x*") == "a\\|b &lt;script&gt; \\*x\\*"
    assert rep._md("max_model_len") == "max_model_len" and rep._md("_x_") == "\\_x\\_"


def _top_level_examples(tmp_path: Path) -> Path:
    """A folder holding examples/deploy's top-level files only (its format folders hold broken
    copies that fail on purpose: tests/deploy/test_manifests.py)."""
    folder = tmp_path / "deploy"
    folder.mkdir()
    for p in EXAMPLES.iterdir():
        if p.is_file():
            (folder / p.name).write_bytes(p.read_bytes())
    return folder


def test_check_format_markdown_is_gfm_with_a_row_per_deployment(capsys):
    files = sorted(str(p) for p in EXAMPLES.iterdir() if p.is_file())
    code, out, _ = run(capsys, "check", *files, "--format", "markdown")
    assert code == 0
    tokens = _gfm(out)
    rows = sum(t.type == "tr_open" for t in tokens)
    assert rows == 1 + len(files)
    assert "✅ fits" in out and "### Needs attention" in out


def test_check_accepts_a_directory(capsys, tmp_path):
    code, out, _ = run(capsys, "check", str(_top_level_examples(tmp_path)), "--json")
    assert code == 0 and json.loads(out)["summary"]["deployments"] == 6


# ------------------------------------------------------------------------- HTML


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if a.get("id"):
            self.ids[a["id"]] = tag


def test_html_is_one_self_contained_accessible_file(report70):
    html = rep.render_html(report70)
    page = _Page()
    page.feed(html)
    tags = [t for t, _ in page.tags]
    assert "script" not in tags and "link" not in tags and "img" not in tags
    assert "iframe" not in tags and "object" not in tags
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace, never fetched
    assert "@import" not in html and "url(" not in html.replace("url(#", "")
    csp = [a for t, a in page.tags
           if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and csp[0]["content"].startswith("default-src 'none'")
    charts = [a for t, a in page.tags if t == "svg"]
    assert len(charts) == 6  # memory, KV curve, engines; TTFT, TPOT, throughput vs concurrency
    for a in charts:
        assert a["role"] == "img"
        t, d = a["aria-labelledby"].split()
        assert page.ids[t] == "title" and page.ids[d] == "desc"
    assert "@media print" in html and "@media (max-width:600px)" in html
    assert 'name="viewport"' in html
    for colour in svg.OKABE_ITO[:5]:
        assert colour in html


def _contrast(a: str, b: str) -> float:
    def lum(h: str) -> float:
        c = [int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_text_colours_meet_wcag_aa_contrast(report70):
    html = rep.render_html(report70)
    for var in ("ok", "bad"):  # white verdict text on the badge
        colour = re.search(rf"--{var}:(#[0-9A-Fa-f]{{6}})", html).group(1)
        assert _contrast(colour, "#ffffff") >= 4.5, var
    # percentages printed inside the memory bar
    for fill, ink in re.findall(r'fill="(#[0-9A-Fa-f]{6})" stroke="#fff" stroke-width="1">.*?\n'
                                r'<text[^>]*fill="(#[0-9a-f]{3,6})"', html):
        ink = "#" + "".join(ch * 2 for ch in ink[1:]) if len(ink) == 4 else ink
        assert _contrast(fill, ink) >= 4.5, (fill, ink)


def test_sections_render_only_when_their_inputs_exist(report70, p70):
    import dataclasses

    html = rep.render_html(report70)
    assert "Options from a sweep" not in html  # no sweep passed in
    assert "Latency and throughput versus concurrency" in html  # the plan has performance
    bare = dataclasses.replace(report70, sections=(rep.section_for(
        p70.model_copy(update={"performance": None})),))
    assert "Latency and throughput" not in rep.render_html(bare)

    slo = plan("llama-3.1-70b-instruct", "h100", tensor_parallel_size=4, max_model_len=32768,
               workload=W32.model_copy(update={"slo_ttft_ms": 400, "slo_tpot_ms": 40}))
    sweep = (rep.SweepOption("4 × H100 tp4", True, 12.0, 6 * 2**30, 452464, chosen=True),
             rep.SweepOption("8 × L40S tp8", True, 8.0, 3 * 2**30, 200000))
    r = dataclasses.replace(report70, sections=(rep.section_for(slo),), sweep=sweep)
    html = rep.render_html(r)
    assert "Options from a sweep" in html and "cost (USD per hour)" in html
    assert "Latency and throughput versus concurrency" in html and "SLO ttft_ms 400" in html
    md = rep.render_markdown(r)
    assert "## Options from a sweep" in md and "Latency and throughput" in md
    assert not [t for t in _gfm(md) if t.type == "html_block"]


# ------------------------------------------------------------- CLI, determinism, errors


def test_report_cli_writes_byte_identical_files(capsys, tmp_path):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    for out in (a, b):
        code, _, err = run(capsys, "report", *ARGS, "-o", str(out))
        assert code == 0, err
    text_a = a.read_text().replace(str(a), "OUT")
    assert text_a == b.read_text().replace(str(b), "OUT")
    assert not re.search(r"20\d\d-\d\d-\d\d", text_a)  # no timestamp unless passed in
    code, out, _ = run(capsys, "report", *ARGS, "--format", "md", "--generated-at", "2026-12-01")
    assert code == 0 and out.startswith("# Sizing report") and "generated 2026-12-01" in out
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary files were renamed


def test_report_on_a_deployment_directory_has_a_section_per_deployment(capsys, tmp_path):
    out = tmp_path / "review.md"
    code, _, err = run(capsys, "report", str(_top_level_examples(tmp_path)), "-o", str(out))
    assert code == 0, err
    md = out.read_text()
    assert md.count("\n## ") == 6 + 1  # six deployments, then "Regenerate this report"
    assert "deploy/k8s-deployment.yaml:19" in md
    assert not [t for t in _gfm(md) if t.type in ("html_block", "html_inline")]


@pytest.mark.parametrize("args, needle", [
    (("-o", "{tmp}/no-such-dir/r.html"), "no-such-dir"),
    (("-o", "{tmp}/r.pdf"), "r.pdf"),
    (("--format", "docx"), "docx"),
    (("-o", "{tmp}"), "is a directory"),
    (("--target-concurrency", "0", "-o", "{tmp}/r.md"), "--target-concurrency"),
])
def test_bad_output_exits_2_naming_it_and_writes_nothing(capsys, tmp_path, args, needle):
    args = tuple(a.format(tmp=tmp_path) for a in args)
    before = sorted(tmp_path.rglob("*"))
    code, out, err = run(capsys, "report", "llama-3.1-8b-instruct", "--gpu", "h100", *args)
    assert code == 2 and needle in err and "Traceback" not in err
    assert sorted(tmp_path.rglob("*")) == before and out == ""


def test_a_directory_with_nothing_to_plan_exits_2_naming_it(capsys, tmp_path):
    empty = tmp_path / "deploy"
    empty.mkdir()
    (empty / "README.txt").write_text("nothing here")
    code, _, err = run(capsys, "report", str(empty), "-o", str(tmp_path / "r.html"))
    assert code == 2 and str(empty) in err and "nothing to plan" in err
    assert not (tmp_path / "r.html").exists()


def test_a_failed_write_leaves_the_old_report_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "r.html"
    target.write_text("old")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    from kvplan.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="r.html: No space left"):
        rep.write_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_an_unwritable_directory_is_named(tmp_path, monkeypatch):
    import tempfile

    from kvplan.errors import InvalidInputError

    def denied(**kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(InvalidInputError, match=r"r\.md: Permission denied") as e:
        rep.write_atomic(tmp_path / "r.md", "x")
    assert e.value.exit_code == 2 and not (tmp_path / "r.md").exists()


def test_report_module_is_lazy():
    cli = ("import sys, kvplan.cli; "
           "assert not {'kvplan.render.report', 'kvplan.render.svg'} & set(sys.modules)")
    assert subprocess.run([sys.executable, "-c", cli], timeout=60).returncode == 0
    code = ("import sys, kvplan.render.report, kvplan.render.svg\n"
            "bad = [m for m in ('rich', 'markdown_it', 'kvplan.deploy.check',\n"
            "                   'kvplan.deploy.commands',\n"
            "                   'kvplan.render.text', 'typer') if m in sys.modules]\n"
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------ a real headless browser

_PROBE = """<script>
const seen = {errors: [], blocked: []};
addEventListener('error', e => seen.errors.push(String(e.message)));
for (const level of ['error', 'warn']) {
  const original = console[level];
  console[level] = (...args) => { seen.errors.push(args.join(' ')); original(...args); };
}
document.addEventListener('securitypolicyviolation', e => seen.blocked.push(e.blockedURI));
addEventListener('load', () => {
  const charts = [...document.querySelectorAll('svg.chart')].map(s => {
    const r = s.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; });
  const out = document.createElement('pre'); out.id = 'kvplan-probe';
  out.textContent = JSON.stringify({charts, errors: seen.errors, blocked: seen.blocked,
    resources: performance.getEntriesByType('resource').map(r => r.name),
    scrollWidth: document.documentElement.scrollWidth, innerWidth: innerWidth,
    title: document.title});
  document.body.appendChild(out);
});
</script>"""


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chromium-headless-shell"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _browse(exe: str, url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [exe, "--headless", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp / 'profile'}",
            "--virtual-time-budget=3000", *extra, url]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium refuses to sandbox as root (CI containers)
    return subprocess.run(args, capture_output=True, text=True, timeout=90)


def _console_messages(stderr: str) -> list[str]:
    """Every page console message Chromium logs (`INFO:CONSOLE(…)`: script errors, CSP
    refusals of a blocked load, console.error). The report logs nothing, so any is a failure."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "net::ERR" in line]


@pytest.mark.skipif(_chromium() is None, reason="no Chromium on PATH: `apt-get install chromium` "
                    "(Debian); .ci/run installs it when it runs as root")
def test_html_report_in_a_real_headless_browser(capsys, tmp_path):
    """Loads without console errors or network requests, charts have a size on a desktop and a
    phone, the page does not scroll sideways on a phone, and it prints to PDF."""
    exe = _chromium()
    started = time.monotonic()
    page = tmp_path / "sizing.html"
    code, _, err = run(capsys, "report", *ARGS, "-o", str(page))
    assert code == 0, err
    html = page.read_text()

    # 1. The report as shipped: its own CSP would block any fetch, and Chromium would log the
    #    refusal as a console message; there must be none.
    shot = tmp_path / "shot.png"
    r = _browse(exe, page.as_uri(), tmp_path, "--window-size=1200,2000", f"--screenshot={shot}")
    assert shot.exists() and shot.stat().st_size > 20_000, r.stderr[-2000:]
    assert _console_messages(r.stderr) == []

    # 2. A probe copy: the same CSP (default-src 'none') plus one inline script that records
    #    blocked requests, script errors, chart sizes and horizontal overflow into the DOM.
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    assert csp in html
    probe = html.replace(csp, csp + "; script-src 'unsafe-inline'").replace(
        "</head>", _PROBE + "\n</head>")
    probe_file = tmp_path / "probe.html"
    probe_file.write_text(probe)
    for width, height in ((1200, 900), (500, 844)):  # 500: headless Chromium's narrowest
        r = _browse(exe, probe_file.as_uri(), tmp_path, f"--window-size={width},{height}",
                    "--dump-dom")
        m = re.search(r'<pre id="kvplan-probe">(.*?)</pre>', r.stdout, re.DOTALL)
        assert m, (r.stdout[-1000:], r.stderr[-2000:])
        got = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&")
                         .replace("&lt;", "<").replace("&gt;", ">"))
        assert got["errors"] == [] and got["blocked"] == [] and got["resources"] == []
        # memory stack, KV curve, engines compared, TTFT/TPOT/throughput versus concurrency,
        # and the sweep's cost versus spare KV memory (the CLI report includes the sweep)
        assert len(got["charts"]) == 7 and all(w > 200 and h > 50 for w, h in got["charts"]), got
        assert got["scrollWidth"] <= got["innerWidth"], f"sideways scroll at {width}px: {got}"
        assert got["title"].startswith("Sizing report")
        assert _console_messages(r.stderr) == []

    # 3. Print: the print stylesheet yields a PDF.
    pdf = tmp_path / "sizing.pdf"
    _browse(exe, page.as_uri(), tmp_path, "--no-pdf-header-footer", f"--print-to-pdf={pdf}")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 20_000
    print(f"headless Chromium checks took {time.monotonic() - started:.1f} s")


def test_the_report_plans_exactly_what_kvplan_plan_plans():
    """Every view agrees (issue #21 item 4): the report's deployment is `kvplan plan`'s, so a
    target it misses lists the same alternatives, the larger GPU included, and the same price."""
    w = Workload(target_concurrency=32)
    knobs = {"tensor_parallel_size": 4, "max_model_len": 32768}
    data = plan_report("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm-80gb", workload=w,
                       with_sweep=False, **knobs)
    alone = plan("meta-llama/Llama-3.1-70B-Instruct", "h100-sxm-80gb", workload=w, **knobs)
    assert data.plan == alone
    missed = [p for p in alone.problems if p.code == "target-not-met"]
    assert missed and "a larger GPU" in missed[0].message
    html = rep.render(rep.for_model(data, command_line="kvplan report", version="0",
                                    generated_at=None), "html")
    assert missed[0].message.split("alternatives, cheapest first: ")[1] in html


def test_a_priced_report_keeps_its_sweep_at_that_price():
    """`report --gpu-hour-price` reached the sweep as an unknown knob, the sweep raised and its
    section vanished without a word; the price is the sweep's price for that GPU too."""
    data = plan_report("llama-3.1-8b-instruct", "h100", gpu_hour_price=2.5,
                       max_model_len=8192)
    assert data.plan.performance is not None and data.sweep is not None
    mine = [o for o in data.sweep.options if o.gpu == data.plan.gpu.id]
    assert mine and all(o.price_per_hour == 2.5 * o.count for o in mine)


def test_length_labels_use_the_clis_own_k_and_K():
    """The KV chart labels lengths as --max-model-len reads them: 32K = 32,768, 32k = 32,000
    (before 2026-12-03 32,768 was labelled '32k', which the CLI reads as 32,000)."""
    from kvplan.deploy.commands import human_int
    from kvplan.render.report import tokens_k

    for n in (4096, 32768, 131072, 32000, 1000, 8192):
        label = tokens_k(n)
        assert human_int(label) == n, (n, label)
    assert tokens_k(1500) == "1,500" and tokens_k(32768) == "32K" and tokens_k(32000) == "32k"


def test_report_sweep_rows_show_what_they_are_ranked_by(capsys, tmp_path):
    """The report's sweep table is in the sweep's order, so it shows the $ per million tokens
    that order reads (the pessimistic end unless --rank-on point), marks extrapolated options
    and says so; --rank-on reaches it, and a bad value is refused as `kvplan sweep` refuses it."""
    out = tmp_path / "r.md"
    code, _, _ = run(capsys, "report", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                     "--max-model-len", "8192", "-o", str(out))
    text = out.read_text()
    head = "| option | meets target | cost per hour | $ per M tokens | KV spare per GPU |"
    assert code == 0 and head in text and "In the sweep's order" in text
    assert "at the pessimistic end of the latency and throughput bands" in text
    code, _, _ = run(capsys, "report", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                     "--max-model-len", "8192", "--rank-on", "point", "-o", str(out))
    assert code == 0 and "at the point estimates" in out.read_text()
    code, _, err = run(capsys, "report", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                       "--rank-on", "banana", "-o", str(out))
    assert code == 2 and "--rank-on must be pessimistic or point" in err
    code, _, err = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                       "--rank-on", "point")
    assert code == 2 and "No such option: --rank-on" in err  # plan ranks nothing


def test_report_and_compare_compare_engines_at_the_format_asked(capsys, tmp_path):
    """A what-if format (--quantization nvfp4) reaches the engine comparison: the engines that
    serve it are planned in it, the others named with why (before 2026-12-03 the comparison
    planned the 16-bit checkpoint beside a 4-bit deployment)."""
    code, out, _ = run(capsys, "compare", "Qwen/Qwen3-32B", "--gpu", "h100", "--quantization",
                       "nvfp4", "--kv-cache-dtype", "fp8", "--json")
    data = json.loads(out)
    planned = {p["engine"]["name"]: p for p in data["plans"]}
    assert code == 0 and "vllm" in planned and "--quantization modelopt_fp4" in (
        planned["vllm"]["command"])
    assert {r["engine"] for r in data["refused"]} >= {"tgi"}
    md = tmp_path / "r.md"
    run(capsys, "report", "Qwen/Qwen3-32B", "--gpu", "h100", "--quantization", "nvfp4",
        "--kv-cache-dtype", "fp8", "-o", str(md))
    assert planned["vllm"]["command"] in md.read_text()


def test_report_versus_concurrency_table_is_the_plans(capsys, tmp_path, monkeypatch):
    """The report's data table versus concurrency has `kvplan plan`'s headers, rounding and ✗
    marks, in Markdown and HTML (it had the raw field names ttft_ms … throughput_tokens_per_s
    and unrounded values such as 5.193 and 1301.1)."""
    monkeypatch.setenv("COLUMNS", "200")
    args = ("meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--slo-ttft-ms", "400")
    code, out, _ = run(capsys, "plan", *args)
    lines = out.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("Versus concurrency")))
    head = [c.strip() for c in lines[start + 1].split("┃")]
    rows = [[c.strip() for c in x.split("│")]
            for x in lines[start + 3:] if "│" in x]
    assert code == 0 and head == ["concurrent", "running", "TTFT ms", "TPOT ms", "tokens/s",
                                  "bound"]
    assert any("✗" in r[2] for r in rows) and any("," in r[4] for r in rows), rows
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    for path in (md, html):
        code, _, err = run(capsys, "report", *args, "-o", str(path))
        assert code == 0, err
    text = md.read_text()
    table = text[text.index("versus concurrency\n"):].split("\n\n")[1].splitlines()
    assert [c.strip() for c in table[0].strip("|").split("|")] == head
    assert [[c.strip() for c in x.strip("|").split("|")] for x in table[2:]] == rows
    assert "SLOs: TTFT 400 ms (✗ = misses a latency target)" in text
    page = html.read_text()
    data = page[page.index('<p class="tcap">Data</p>'):]
    data = data[:data.index("</table>")]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", data) == head
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", data)
    assert [cells[i:i + len(head)] for i in range(0, len(cells), len(head))] == rows


def test_report_shows_the_plans_headline_figures_and_multi_node_launch(capsys, tmp_path):
    """The report's performance block is `kvplan plan`'s: the same title (calibrated or not,
    and why), bands, cost and where the coefficients come from; a plan across nodes shows one
    launch line per node role, not a single-node command (both missing before 2026-12-03)."""
    md = tmp_path / "r.md"
    code, _, _ = run(capsys, "report", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                     "--engine", "tgi", "--max-model-len", "8192", "-o", str(md))
    text = md.read_text()
    code_p, out, _ = run(capsys, "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100",
                         "--engine", "tgi", "--max-model-len", "8192", "--json")
    pf = json.loads(out)["performance"]
    assert code == code_p == 0 and "### Latency, throughput and cost" in text
    assert f"not calibrated: {pf['not_calibrated_because']}" in text
    assert f"| TTFT, ms | {pf['ttft_ms']:,.0f} | {pf['ttft_ms_low']:,.0f}–" in text
    assert f"| $ per hour | {pf['cost_per_hour']:,.2f} |" in text
    assert f"Coefficients: {pf['calibration']}." in text
    code, _, _ = run(capsys, "report", "deepseek-ai/DeepSeek-V3", "--gpu", "h100", "-tp", "8",
                     "-pp", "2", "-o", str(md))
    text = md.read_text()
    assert "Recommended launch, 2 nodes × 8 GPUs" in text
    assert "# node rank 1" in text and "--nnodes 2" in text


def test_a_deployment_files_report_names_the_error_check_found(capsys, tmp_path):
    """The verdict's detail is the check's own error (1 GPU for TP 2), not a KV figure."""
    md = tmp_path / "r.md"
    run(capsys, "report", str(EXAMPLES / "production-stack" /
                              "broken-values-04-multiple-models.yaml"), "-o", str(md))
    verdicts = [line for line in md.read_text().splitlines() if line.startswith("**Verdict")]
    assert any("DOES NOT FIT** — the file gives the container 1 GPU(s)" in v for v in verdicts)


def test_an_unplanned_deployment_keeps_its_model_and_says_why(capsys, tmp_path):
    """A row `check` could not plan shows the model the file names in the model column, and
    its error in a list of its own (the error filled the model column before 2026-12-03)."""
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    broken = str(EXAMPLES / "ray" / "broken-llm-config.yaml")
    run(capsys, "report", broken, "-o", str(md))
    run(capsys, "report", broken, "-o", str(html))
    text = md.read_text()
    row = next(line for line in text.splitlines() if "broken-llm-config.yaml:15` |" in line)
    assert "`Qwen/Qwen2.5-1.5B-Instruct`" in row and "exceeds" not in row
    assert "Not planned:" in text and "--max-model-len 65536 exceeds the model's maximum" in text
    assert "<p>Not planned:</p><ul><li><code>" in html.read_text()


def test_a_reviewed_deployment_the_sweep_did_not_plan_is_ranked_as_the_sweep_ranks():
    """The reviewed deployment on a GPU the sweep did not try gets its own row, with the $ per
    million output tokens the sweep ranks by: the hourly price ÷ (tokens/s at the band's low
    end × 3,600) × 10⁶ (pessimistic), or at the estimate (point). It used to have none."""
    from kvplan.api import sweep

    w = Workload(target_concurrency=16, avg_input_tokens=1000, avg_output_tokens=200)
    mine = plan("llama-3.1-8b", "l40s", max_model_len=8192, workload=w)
    perf = mine.performance
    assert perf is not None and perf.cost_per_hour
    for rank_on, tput in (("pessimistic", perf.output_tokens_per_s_low),
                          ("point", perf.output_tokens_per_s)):
        result = sweep("llama-3.1-8b", gpus=["h100"], max_model_len=8192, workload=w,
                       rank_on=rank_on)
        rows = rep.sweep_options(result, mine)
        (row,) = [r for r in rows if r.chosen]
        assert row is rows[-1] and row.label.startswith("1 × l40s TP1")
        assert row.cost_per_million == pytest.approx(perf.cost_per_hour / (tput * 3600) * 1e6,
                                                     abs=1e-4)
        assert row.rank_on == rank_on and row.extrapolated is (perf.calibrated is False)


def test_a_reviewed_deployment_the_sweep_did_not_plan_shows_its_own_cost_for_the_rate():
    """At a request rate the sweep's rows carry the replicas and $ per day it ranked them by;
    the reviewed deployment on a GPU the sweep did not try shows its own plan's: its replicas
    × its $ per hour × 24 h, simulated (no e)."""
    from kvplan.api import sweep

    w = Workload(avg_input_tokens=1000, avg_output_tokens=200, request_rate=5,
                 slo_ttft_ms=2000)
    mine = plan("llama-3.1-8b", "l40s", max_model_len=8192, workload=w)
    perf = mine.performance
    assert perf is not None and perf.replicas and perf.cost_per_hour
    result = sweep("llama-3.1-8b", gpus=["h100"], max_gpus=1, max_model_len=8192, workload=w)
    rows = rep.sweep_options(result, mine)
    (row,) = [r for r in rows if r.chosen]
    assert row is rows[-1] and row.label.startswith("1 × l40s TP1")
    assert row.request_rate == 5 and row.replicas == perf.replicas and row.replicas_simulated
    assert row.cost_per_day == pytest.approx(perf.replicas * perf.cost_per_hour * 24, abs=0.01)
    h100 = rows[0]
    assert h100.label.startswith("1 × h100") and h100.cost_per_day is not None
    md = rep.render_markdown(rep.Report(title="t", command_line="x", version="0", sections=(),
                                        sweep=tuple(rows)))
    assert "| replicas for 5 req/s | $ per day |" in md
    assert f"| {perf.replicas} | ${row.cost_per_day:,.2f} |" in md


@pytest.mark.parametrize("slo", [["--slo-ttft-ms", "60"],
                                 ["--request-rate", "5", "--slo-ttft-ms", "60",
                                  "--slo-percentile", "99"]])
def test_a_report_exits_as_its_plan_does_when_a_target_is_missed(capsys, slo):
    """A plan that fits in memory but misses its latency target exits 1 (an error problem);
    its report exited 0 though it listed the same errors (exit codes: as for plan)."""
    args = ("llama-3.1-8b-instruct", "--gpu", "h100", "--avg-input-tokens", "2000",
            "--avg-output-tokens", "300", *slo)
    code, out, _ = run(capsys, "plan", *args, "--json")
    assert code == 1 and json.loads(out)["fits"] is True
    assert any(p["severity"] == "error" for p in json.loads(out)["problems"])
    code, _, _ = run(capsys, "report", *args)
    assert code == 1
