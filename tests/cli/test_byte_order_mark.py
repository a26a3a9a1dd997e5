"""Files saved with a UTF-8 byte-order mark (Excel's "CSV UTF-8", Windows PowerShell's
Out-File): every reader takes them as the same file without it (sources.limits
read_text_limited drops one leading mark). They were refused with messages that did not point
at it: `field 'id' … (got \\ufeffid, usd_per_hour)`, "the header must be time,requests_per_s",
"Unexpected UTF-8 BOM", or a shell script with no serving command found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import run

from kvplan.errors import InvalidConfigError
from kvplan.sources.limits import read_text_limited

BOM = b"\xef\xbb\xbf"
LLAMA = "llama-3.1-8b-instruct"
L40S = (Path(__file__).parents[1] / "sources" / "fixtures" / "bench"
        / "vllm_llama-3.2-3b_l40s_results.json")


def _bom(path: Path, text: str) -> Path:
    path.write_bytes(BOM + text.replace("\n", "\r\n").encode())
    return path


def test_the_shared_reader_drops_one_mark_and_keeps_offsets(tmp_path: Path) -> None:
    p = tmp_path / "f.txt"
    p.write_bytes(BOM + b"a\r\nb\n")
    assert read_text_limited(p, 100) == "a\r\nb\n"
    p.write_bytes(BOM + BOM + b"a")  # one mark is the file's encoding; a second is content
    assert read_text_limited(p, 100) == "\ufeffa"
    p.write_bytes(BOM + b"ab\xff")  # the offset is the file's own byte, the mark counted
    with pytest.raises(InvalidConfigError, match="undecodable byte at offset 5"):
        read_text_limited(p, 100)


def test_sweep_reads_a_price_csv_with_a_mark(capsys, tmp_path: Path) -> None:
    prices = _bom(tmp_path / "prices.csv", "id,usd_per_hour\nh100,2.5\n")
    code, out, err = run(capsys, "sweep", LLAMA, "--gpus", "h100", "--max-gpus", "1",
                         "--max-model-len", "4096", "--prices", str(prices), "--json")
    assert code in (0, 1), err
    assert {o["price_per_hour"] for o in json.loads(out)["options"]} == {2.5}


@pytest.mark.parametrize(("flag", "text"), [
    ("--traffic", "time,requests_per_s\n0,2\n12,4\n"),
    ("--trace", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,500,50\n2,700,70\n"),
    ("--lengths-file", "input_tokens,output_tokens\n500,50\n700,70\n"),
])
def test_plan_reads_workload_files_with_a_mark(capsys, tmp_path: Path, flag: str,
                                                text: str) -> None:
    f = _bom(tmp_path / "w.csv", text)
    rate = [] if flag != "--lengths-file" else ["--request-rate", "1"]
    code, out, err = run(capsys, "plan", LLAMA, "--gpu", "h100", flag, str(f), *rate, "--json")
    assert code == 0, err
    assert "performance" in json.loads(out)


def test_calibrate_reads_json_lines_with_a_mark(capsys, tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(L40S.read_text())
    marked = tmp_path / "marked.json"
    marked.write_bytes(BOM + L40S.read_bytes())
    results = []
    for f in (plain, marked):
        code, out, err = run(capsys, "calibrate", str(f), "--max-model-len", "4096", "--check",
                             "--json")
        assert "BOM" not in out + err
        results.append((code, len(json.loads(out)["runs"])))
    assert results[0] == results[1] and results[1][1] > 0


def test_check_finds_the_command_and_the_policy_behind_a_mark(capsys, tmp_path: Path,
                                                             monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _bom(tmp_path / "run.sh", "vllm serve meta-llama/Llama-3.1-8B-Instruct "
         "--max-model-len 8192\n")
    code, out, err = run(capsys, "check", "run.sh", "--gpu", "h100", "--offline", "--json")
    assert code == 0, out + err
    [row] = json.loads(out)["deployments"]
    assert row["status"] == "fits"
    _bom(tmp_path / "kvplan.toml", "[tool.kvplan]\nmin_headroom_gib = 1\n")
    code, out, err = run(capsys, "check", "run.sh", "--gpu", "h100", "--offline", "--json")
    assert code == 0, out + err
