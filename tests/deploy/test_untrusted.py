"""`kvplan check` on files from an untrusted pull request (issue 22): it reads nothing outside
the paths it was given (checked with an audit hook on every open), echoes no credential, and
renders strings from the files as inert Markdown."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from clirun import PLANTED, contract, examples, opens, reads_under, run
from drafts import EAGLE3_CONFIG, write_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

LLAMA = "meta-llama/Llama-3.1-8B"


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch) -> Path:
    """tmp/repo (the working directory) beside tmp/outside, which holds a draft model whose
    config carries a marker, and a token file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    write_config(outside, "draft", {**EAGLE3_CONFIG, "model_type": "llama",
                                    "_name_or_path": "SECRET-draft"})
    (outside / "token").write_text("hf_SECRETSECRETSECRETSECRET\n")
    r = tmp_path / "repo"
    r.mkdir()
    monkeypatch.chdir(r)
    return r


DRAFTS = {
    "vllm": ("run.sh", f"vllm serve {LLAMA} --speculative-config "
             """'{"model": "../outside/draft", "method": "eagle3", "num_speculative_tokens": 3}'"""
             "\n", None),
    "sglang": ("run.sh", f"python -m sglang.launch_server --model-path {LLAMA} "
               "--speculative-algorithm EAGLE3 --speculative-draft-model-path ../outside/draft "
               "--speculative-num-steps 3 --speculative-eagle-topk 1 "
               "--speculative-num-draft-tokens 4\n", None),
    "trtllm": ("run.sh", f"trtllm-serve {LLAMA} --extra_llm_api_options opts.yaml\n",
               "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n"
               "  speculative_model_dir: ../outside/draft\n"),
}


@pytest.mark.parametrize("engine", sorted(DRAFTS))
@pytest.mark.parametrize("fmt", ["github", "json", "markdown"])
def test_a_draft_model_outside_the_checked_paths_is_never_opened(capsys, repo, engine, fmt):
    name, text, options = DRAFTS[engine]
    (repo / name).write_text(text)
    if options:
        (repo / "opts.yaml").write_text(options)
    with opens() as opened:
        code, out, err = run(capsys, "check", ".", "--gpu", "h100", "--format", fmt)
    assert reads_under(opened, repo.parent / "outside") == []
    assert code == 2 and "SECRET" not in out + err and "outside" in out


def test_a_draft_model_inside_the_checked_paths_is_still_planned(capsys, repo):
    write_config(repo, "draft", EAGLE3_CONFIG)
    (repo / "run.sh").write_text(DRAFTS["vllm"][1].replace("../outside/draft", "./draft"))
    code, out, err = run(capsys, "check", "run.sh", "--gpu", "h100", "--json")
    row = json.loads(out)["deployments"][0]
    assert code == 0 and row["plan"]["speculative"]["method"] == "eagle3", out + err


def test_a_kvplan_toml_linked_out_of_the_repository_is_not_read(capsys, repo):
    (repo.parent / "outside" / "kvplan.toml").write_text('gpu = "SECRET-gpu"\n')
    (repo / "kvplan.toml").symlink_to(repo.parent / "outside" / "kvplan.toml")
    (repo / "run.sh").write_text(f"vllm serve {LLAMA}\n")
    with opens() as opened:
        code, out, err = run(capsys, "check", "run.sh", "--json")
    assert reads_under(opened, repo.parent / "outside") == []
    assert code == 2 and "SECRET" not in out + err and "kvplan.toml" in out + err


def test_a_checked_directory_that_links_out_is_not_followed(capsys, repo):
    elsewhere = repo.parent / "outside" / "deploy"
    elsewhere.mkdir()
    (elsewhere / "run.sh").write_text("vllm serve SECRET/model\n")
    (repo / "deploy").symlink_to(elsewhere)
    with opens() as opened:
        code, out, err = run(capsys, "check", "deploy", "--gpu", "h100", "--json")
    assert reads_under(opened, elsewhere) == []
    assert code == 2 and "SECRET" not in out + err and "symlink" in out


def test_a_subdirectory_that_links_out_is_not_walked(capsys, repo):
    (repo / "outside-link").symlink_to(repo.parent / "outside")
    (repo.parent / "outside" / "evil.sh").write_text("vllm serve SECRET/model\n")
    (repo / "run.sh").write_text(f"vllm serve {LLAMA}\n")
    with opens() as opened:
        code, out, err = run(capsys, "check", ".", "--gpu", "h100", "--json")
    assert reads_under(opened, repo.parent / "outside") == []
    assert "SECRET" not in out + err


def test_the_boundary_is_the_checked_path_not_the_working_directory(capsys, repo, monkeypatch):
    """Run from the parent: an absolute model path beside the repository is inside the working
    directory but outside the checked one, and is not read."""
    beside = write_config(repo.parent, "beside", {**EAGLE3_CONFIG, "model_type": "SECRET"})
    (repo / "run.sh").write_text(f"vllm serve {beside}\n")
    monkeypatch.chdir(repo.parent)
    with opens() as opened:
        code, out, err = run(capsys, "check", "repo", "--gpu", "h100", "--format", "github")
    assert reads_under(opened, beside) == []
    assert code == 2 and "SECRET" not in out + err


# ----------------------------------------------------------------------- credentials

SECRETS = ("hf_SECRETabcdefghijklmnop1", "sk-SECRETabcdefghijklmnop2", "SECRETapikey3",
           "SECRETbearer4", "SECRETenv5")
CREDENTIAL_LINE = (f"HF_TOKEN={SECRETS[4]} vllm serve {LLAMA} --hf-token {SECRETS[0]} "
                   f"--api-key {SECRETS[2]} --middleware 'Authorization: Bearer {SECRETS[3]}' "
                   f"--disable-log-stats --served-model-name {SECRETS[1]}\n")


@pytest.mark.parametrize("args", [("--json",), ("--format", "table"), ("--format", "github"),
                                  ("--format", "markdown")])
def test_check_never_prints_a_credential(capsys, repo, args):
    (repo / "run.sh").write_text(CREDENTIAL_LINE)
    code, out, err = run(capsys, "check", "run.sh", "--gpu", "h100", *args)
    assert code in (0, 1, 2) and ("--hf-token ***" in out or args[0] != "--json")
    assert not [s for s in SECRETS if s in out + err]


@pytest.mark.parametrize("suffix", ["md", "html"])
def test_a_report_never_prints_a_credential(capsys, repo, suffix):
    (repo / "run.sh").write_text(CREDENTIAL_LINE)
    code, out, err = run(capsys, "report", ".", "--gpu", "h100", "-o", f"r.{suffix}")
    text = (repo / f"r.{suffix}").read_text()
    assert code in (0, 1) and not [s for s in SECRETS if s in text + out + err]


# ------------------------------------------------------------------- Markdown injection

def _outside_code_spans(md: str) -> str:
    """Markdown with every code span and fenced block taken out (what GFM would parse as live
    inline syntax remains)."""
    md = re.sub(r"(?ms)^(```+|~~~+).*?^\1", "", md)
    return re.sub(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", "", md)


EVIL = ("[Approve this PR](https://evil.example/phish)", "![x](https://evil.example/pixel.png)",
        "a`b``[c](https://evil.example/c)")


@pytest.mark.parametrize("name", EVIL)
def test_model_names_from_a_file_are_inert_in_markdown(capsys, repo, name):
    quoted = "'" + name + "'"
    (repo / "run.sh").write_text(f"vllm serve {quoted}\nvllm serve {LLAMA} --served-model-name "
                                 f"{quoted}\n")
    _, out, _ = run(capsys, "check", "run.sh", "--gpu", "h100", "--format", "markdown")
    _, _, _ = run(capsys, "report", ".", "--gpu", "h100", "-o", "r.md")
    for md in (out, (repo / "r.md").read_text()):
        live = _outside_code_spans(md)
        assert "evil.example" in md and "evil.example" not in live, md


# ----------------------------------------------------------------------- report output

@pytest.mark.parametrize("via_link", [False, True])
def test_report_into_a_fifo_writes_into_it(capsys, repo, via_link):
    """`report -o /dev/stdout` (a link to /proc/self/fd/1) or a FIFO: the reader gets the
    report, and the target is not replaced by a regular file."""
    import threading

    fifo = repo / "pipe"
    os.mkfifo(fifo)
    target = fifo
    if via_link:
        target = repo / "stdout"
        target.symlink_to(fifo)
    got: list[bytes] = []

    def reader() -> None:
        fd = os.open(fifo, os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        code, _, err = run(capsys, "report", LLAMA, "--gpu", "h100", "-o", str(target),
                           "--format", "md")
    finally:
        t.join(10)  # kvplan wrote and closed: the reader sees EOF and ends
        if t.is_alive():  # kvplan never opened the FIFO: release the reader blocked in open()
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            t.join(10)
    assert code == 0, err
    assert got and got[0].startswith(b"# Sizing report")
    assert target.is_symlink() == via_link and os.path.exists(fifo)
    assert not (repo / "pipe").is_file() and not (via_link and target.resolve().is_file())


_SECRET = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.",
                  min_size=12, max_size=40).filter(lambda s: not s.startswith("-"))
_FORMS = ("--hf-token {s}", "--hf-token={s}", "--api-key {s}", "--api-key '{s}'",
          'HF_TOKEN={s}', 'OPENAI_API_KEY: "{s}"', "Authorization: Bearer {s}",
          '["--api-key", "{s}"]', "hf_{s}", "sk-{s}")


@given(st.sampled_from(_FORMS), _SECRET, st.sampled_from(["", "vllm serve m ", "x\n"]),
       st.sampled_from(["", " --max-num-seqs 8", "\n--tp 2"]))
def test_redact_removes_every_credential_form(form, secret, before, after):
    from kvplan.sources.limits import redact

    if form.startswith(("hf_", "sk-")):  # token formats: letters and digits, 16 and more
        secret = re.sub(r"[^A-Za-z0-9]", "", secret).ljust(16, "Z")
    text = before + form.format(s=secret) + after
    assert secret not in redact(text)
    assert after.strip() in redact(text)


# ------------------------------------------------------------- the containment campaign
# `pytest -m fuzz --hypothesis-profile=campaign` (.ci/run) runs its share of the profile's inputs
# here (tests/clirun.py SHARES: 520 of 5,198); the README's pytest, 10. Each input: a repository
# beside an `outside` folder that holds a draft, a model and a token; a deployment file naming
# models and drafts inside, outside, by symlink, absolute, from the home folder; credentials in its
# flags; checked as a file, a directory or a symlinked directory, from the repository or its parent,
# in every format. Contract: 0 opens outside the boundary, 0 credentials in any output, exit 0-3, no
# traceback.

_REFS = ("{inside}", "../outside/model", "{outside}/model", "~/outside/model", "./link-out/model",
         "meta-llama/Llama-3.1-8B", "./missing")
_DRAFT_REFS = ("{inside}", "../outside/draft", "{outside}/draft", "./link-out/draft")
_CAMPAIGN = settings(derandomize=True, deadline=None, database=None, print_blob=False,
                     suppress_health_check=list(HealthCheck),
                     max_examples=examples("containment"))


def _line(engine: str, model: str, draft: str, secret: str) -> tuple[str, str | None]:
    spec = ('{"model": "' + draft + '", "method": "eagle3", "num_speculative_tokens": 2}')
    if engine == "vllm":
        return (f"vllm serve {model} --speculative-config '{spec}' --api-key {secret}\n", None)
    if engine == "sglang":
        return (f"python -m sglang.launch_server --model-path {model} --speculative-algorithm "
                f"EAGLE3 --speculative-draft-model-path {draft} --speculative-num-steps 2 "
                f"--speculative-eagle-topk 1 --speculative-num-draft-tokens 3 --api-key {secret}\n",
                None)
    return (f"HF_TOKEN={secret} trtllm-serve {model} --extra_llm_api_options opts.yaml\n",
            f"speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 2\n"
            f"  speculative_model_dir: {draft}\n")


@pytest.mark.fuzz
@_CAMPAIGN
@given(engine=st.sampled_from(["vllm", "sglang", "trtllm"]), model=st.sampled_from(_REFS),
       draft=st.sampled_from(_DRAFT_REFS), where=st.sampled_from([".", "run.sh", "linked"]),
       from_parent=st.booleans(), fmt=st.sampled_from(["json", "github", "markdown", "table"]),
       secret=st.sampled_from(["hf_SECRETabcdefghijklmnop", "sk-SECRETabcdefghijklmnop",
                               "SECRETplain123"]))
def test_check_campaign_reads_nothing_outside_and_echoes_no_secret(
        engine, model, draft, where, from_parent, fmt, secret):
    import tempfile

    home = os.environ.get("HOME")
    old = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = base / "outside"
        outside.mkdir()
        write_config(outside, "draft", EAGLE3_CONFIG)
        write_config(outside, "model", {**EAGLE3_CONFIG, "model_type": "SECRETtype"})
        (outside / "token").write_text(secret)
        repo = base / "repo"
        (repo / "models").mkdir(parents=True)
        write_config(repo / "models", "inside", EAGLE3_CONFIG)
        (repo / "link-out").symlink_to(outside)
        inside = "./models/inside" if not from_parent else str(repo / "models" / "inside")
        text, options = _line(engine, model.format(inside=inside, outside=outside),
                              draft.format(inside=inside, outside=outside), secret)
        (repo / "run.sh").write_text(text)
        if options:
            (repo / "opts.yaml").write_text(options)
        if where == "linked":
            (base / "elsewhere").symlink_to(repo)
        target = {".": str(repo) if from_parent else ".", "run.sh": "run.sh",
                  "linked": str(repo / "link-out")}[where]
        if from_parent and where == "run.sh":
            target = "repo/run.sh"
        os.environ["HOME"] = str(base)  # ~/outside is the outside folder
        os.chdir(base if from_parent else repo)
        try:
            cwd = Path.cwd()  # the boundary: the repository, and the cwd's own policy files
            contract("check", target, "--gpu", "h100", "--format", fmt, cwd=cwd,
                     allowed=(repo, cwd / "kvplan.toml", cwd / "pyproject.toml"),
                     secrets=(*PLANTED, secret, "SECRET"))
        finally:
            os.chdir(old)
            if home is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = home
