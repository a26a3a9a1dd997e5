"""Fuzzing the CLI in-process with hostile input (hypothesis, derandomized, bounded).

Generated inputs across flags (plan, compare, sweep, check, report), config.json mutations,
safetensors headers, deployment files of every kind with planted credentials and references
outside the repository, deep JSON/YAML in every structured flag, price and policy files, Dockerfile
exec forms, a hostile Hub on 127.0.0.1, and output streams that only hold ASCII or Latin-1. Every
input is held to tests/clirun.py's `contract()`: exit 0-3 within a time bound, no traceback or
internal error, JSON alone on stdout when asked for, no planted secret in any output, nothing
opened outside the input's own folder, kvplan and the Python installation (an audit hook).
How many inputs depends on the Hypothesis profile (tests/conftest.py): the README's `pytest`
runs a quick pass of about 100; `.ci/run` runs the campaign, `pytest -m fuzz
--hypothesis-profile=campaign`, of 5,198 (with tests/deploy/test_untrusted.py's containment
property; about three minutes on 2 cores) and measures peak memory of the heaviest inputs.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from clirun import PLANTED, SHARES, contract, examples
from fakehub import FakeHub, FakeRepo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

FUZZ = settings(derandomize=True, deadline=None, database=None, print_blob=False,
                suppress_health_check=list(HealthCheck))

CONFIGS = Path(__file__).resolve().parents[2] / "model_specs" / "configs"
BASES = [
    "meta-llama--Llama-3.1-8B.json",
    "Qwen--Qwen3-30B-A3B-FP8.json",
    "google--gemma-3-4b-it.json",
    "Qwen--Qwen2.5-7B-Instruct.json",
]
TINY = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 1000,
        "intermediate_size": 512, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


@dataclass(frozen=True)
class World:
    """Where inputs live: `base` (pytest's temporary folder: every generated repository and
    model), `cwd` (a scratch working directory inside it) and `outside`, a folder outside the
    boundary holding a token file, a model and a draft whose configs carry a planted secret."""

    base: Path
    cwd: Path
    outside: Path


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> Iterator[World]:
    base = tmp_path_factory.getbasetemp()
    cwd = base / "cwd"
    cwd.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvplan-outside-") as out:
        outside = Path(out)
        (outside / "token").write_text(f"{PLANTED[-1]} {PLANTED[0]}\n")
        for name in ("model", "draft"):
            (outside / name).mkdir()
            (outside / name / "config.json").write_text(
                json.dumps({**TINY, "model_type": "llama", "_name_or_path": PLANTED[-1]}))
        yield World(base, cwd, outside)


def invoke(world: World, *args: str, cwd: Path | None = None, allowed: tuple[Path, ...] = (),
           encoding: str = "utf-8") -> tuple[int, str, str]:
    """`kvplan ARGS…` through cli.main(), in-process, held to the campaign contract; inputs
    under `world.base` are inside the boundary."""
    return contract(*args, cwd=cwd or world.cwd, allowed=(world.base, *allowed),
                    encoding=encoding)


ENCODINGS = st.sampled_from(["utf-8"] * 6 + ["ascii", "latin-1"])  # PYTHONIOENCODING, C locale


# ------------------------------------------------------------------ value pools

HOSTILE_INTS = st.one_of(
    st.integers(-3, 70),
    st.sampled_from([0, -1, 2**31, 2**63, 10**30, 10**400]),
    st.integers(-(2**70), 2**70),
)
HOSTILE_NUMBERS = st.one_of(HOSTILE_INTS, st.floats(allow_nan=False, allow_infinity=False),
                            st.sampled_from([0.5, 1e308, -0.0, 1e-300]))
SHORT_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
JSON_VALUES = st.one_of(
    HOSTILE_NUMBERS,
    st.none(),
    st.booleans(),
    SHORT_TEXT,
    st.sampled_from(["32", "131072", "abc", "auto", "", "fp8", "yarn"]),
    st.lists(HOSTILE_INTS, max_size=3),
    st.builds(dict),
    st.builds(lambda: [0, 0]),
    st.dictionaries(st.sampled_from(["factor", "type", "rope_type"]), HOSTILE_NUMBERS, max_size=2),
)
FLAG_TEXT = st.one_of(
    st.integers(-5, 200).map(str), HOSTILE_INTS.map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e300", "1e30", "0", "-1", "0.9", "32k", "1.5", "", " ",
                     "9" * 400, "0x10", "\u00b2", "\u0663", "\u00bd", "1_000"]),
    SHORT_TEXT)
MODELS = [
    "qwen2.5-7b",
    "qwen2.5-0.5b",
    "meta-llama/Llama-3.1-8B-Instruct",
    "TINY",
    "acme/not-cached",
    "~nosuchuser/x",
    "/dev/zero",
    "/nonexistent/config.json",
    "../x",
    "a" * 300,
    "x\x00y",
    "gemma-3-4b-it",
    "qwen3-30b-a3b",
]
GPUS = ["h100", "l4", "a100-80gb", "NVIDIA H100 80GB HBM3", "h200", "no-such-gpu", ""]
PLAN_FLAGS = [
    "--tensor-parallel-size",
    "-tp",
    "-pp",
    "-dp",
    "--max-model-len",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--max-input-tokens",
    "--gpu-memory-utilization",
    "--dtype",
    "--kv-cache-dtype",
    "--quantization",
    "--block-size",
    "--kv-cache-memory-bytes",
    "--gpu-memory-gib",
    "--engine-version",
    "--target-concurrency",
    "--avg-input-tokens",
    "--avg-output-tokens",
    "--engine",
]
FLAG_CHOICES = {
    "--dtype": ["auto", "bfloat16", "float16", "float32", "int3"],
    "--kv-cache-dtype": ["auto", "fp8", "fp8_e5m2", "fp4"],
    "--quantization": ["fp8", "awq"],
    "--engine": ["vllm", "sglang", "tgi", "trt"],
    "--engine-version": [
        "0.6.3",
        "0.19.0",
        "v0.8.5.post1",
        "2.3.0",
        "0.4.6",
        "99.0",
        "0.1" + "a" * 30 + "!",
    ],
}


def tiny_dir(base: Path) -> Path:
    d = base / "tiny"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(TINY))
    return d


def names_something(err: str, *needles: str) -> bool:
    """An exit-2 message names a flag, a field, a file or the input it refuses."""
    return bool(re.search(r"--?[a-z]|field '|config\.json|model|GPU|engine", err)) or any(
        n and n in err for n in needles)


# ------------------------------------------------------------------------ flags


PLAN_ONLY = ["--gpu-hour-price", "--slo-tpot-ms", "--slo-ttft-ms", "--acceptance-rate",
             "--prefix-hit-rate", "--shared-prefix-tokens", "--images-per-request", "--max-loras",
             "--max-lora-rank", "--cuda-graph-max-bs", "--max-total-tokens", "--hicache-ratio",
             "--token", "--revision"]
COMMAND_FLAGS = {
    "plan": PLAN_FLAGS + PLAN_ONLY,
    "report": PLAN_FLAGS + PLAN_ONLY,
    "compare": ["-tp", "--max-model-len", "--kv-cache-dtype", "--gpu-memory-gib",
                "--target-concurrency", "--avg-input-tokens"],
    "sweep": ["--max-gpus", "--kv-cache-dtype", "--max-model-len", "--target-concurrency",
              "--avg-input-tokens", "--avg-output-tokens", "--slo-tpot-ms", "--slo-ttft-ms",
              "--top", "--gpu-memory-utilization", "--engine", "--engine-version", "--dtype"],
    "check": ["--min-concurrency", "--min-headroom-gib", "--min-kv-tokens",
              "--min-max-model-len", "--max-gpu-memory-utilization", "--engine-version", "--set"],
}
FLAG_CHOICES["--token"] = [PLANTED[0], PLANTED[2]]  # never echoed
FLAG_CHOICES["--set"] = ["model=qwen2.5-7b", "gpus=2", "x=", "MODEL=tiny", f"KEY={PLANTED[1]}"]


def _command_line(world: World, cmd: str, model: str, gpu: str) -> list[str]:
    if cmd == "check":  # the model goes into a file; the flags are the policy's
        repo = world.base / "flags-repo"
        repo.mkdir(exist_ok=True)
        (repo / "run.sh").write_text(
            f"vllm serve {shlex.quote(model)} --api-key {PLANTED[1]}\n", errors="surrogatepass")
        return ["check", str(repo / "run.sh"), "--gpu", gpu]
    if cmd == "sweep":
        return ["sweep", model, "--gpus", gpu or "h100"]
    if cmd == "report":
        return ["report", model, "--gpu", gpu, "-o", str(world.base / "flags-report.md")]
    return [cmd, model, "--gpu", gpu]


@settings(FUZZ, max_examples=examples("flags"))
@given(cmd=st.sampled_from(["plan"] * 6 + ["compare", "sweep", "check", "report"]),
       model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       flags=st.lists(st.tuples(st.sampled_from(sorted(set(sum(COMMAND_FLAGS.values(), [])))),
                                st.data()), max_size=4),
       as_json=st.sampled_from([True, True, False]), encoding=ENCODINGS)
def test_fuzz_flags(world, monkeypatch, cmd, model, gpu, flags, as_json, encoding):
    monkeypatch.setenv("HF_TOKEN", PLANTED[0])  # offline: never sent, never printed
    if model == "TINY":
        model = str(tiny_dir(world.base))
    args = _command_line(world, cmd, model, gpu)
    for flag, data in flags:
        if flag not in COMMAND_FLAGS[cmd]:
            continue
        choices = FLAG_CHOICES.get(flag)
        value = data.draw(st.sampled_from(choices) | FLAG_TEXT if choices else FLAG_TEXT)
        args.append(f"{flag}={value}" if value.startswith("-") or not value.strip() else flag)
        if not args[-1].startswith(f"{flag}="):
            args.append(value)
    if as_json and cmd != "report":
        args += ["--format", "json"] if cmd == "check" else ["--json"]
    named = (Path(model),) if model.startswith(("/", ".")) else ()  # the user named it
    code, out, err = invoke(world, *args, allowed=named, encoding=encoding)
    if code == 2:  # (check --format json says it on stdout)
        assert names_something(err + out, model), err + out


# ---------------------------------------------------------------- config.json


def _paths(cfg: dict, prefix: tuple = ()) -> list[tuple]:
    out = []
    for k, v in cfg.items():
        out.append((*prefix, k))
        if isinstance(v, dict) and len(prefix) < 2:
            out += _paths(v, (*prefix, k))
    return out


BASE_CFGS = [json.loads((CONFIGS / name).read_text()) for name in BASES] + [TINY]
CFG_PATHS = sorted({p for cfg in BASE_CFGS for p in _paths(cfg)})


def config_bytes(base: int, edits: list, corrupt: str | None) -> bytes:
    """One of BASE_CFGS with `edits` applied (a value or DELETE at a path), then corrupted."""
    cfg = json.loads(json.dumps(BASE_CFGS[base]))
    for path, value in edits:
        node = cfg
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            if value == "DELETE":
                node.pop(path[-1], None)
            else:
                node[path[-1]] = copy.deepcopy(value)  # never share (or nest) a generated value
    try:
        text = json.dumps(cfg, allow_nan=True)
    except ValueError:  # an integer beyond the str-conversion limit
        text = json.dumps(TINY)[:-1] + ', "x": ' + "9" * 5000 + "}"
    raw = text.encode()
    if corrupt == "truncate":
        raw = raw[: len(raw) // 2]
    elif corrupt == "non-utf8":
        raw = raw[:10] + b"\xff\xfe" + raw[10:]
    elif corrupt == "digits":
        raw = raw[:-1] + b', "n": ' + b"7" * 5000 + b"}"
    elif corrupt == "deep":
        raw = b"[" * 50_000 + b"]" * 50_000
    elif corrupt == "nan":
        raw = raw[:-1] + b', "hidden_size": NaN}'
    elif corrupt == "array":
        raw = b"[1, 2, 3]"
    return raw


BASE_INDEX = st.integers(0, len(BASE_CFGS) - 1)
EDITS = st.lists(st.tuples(st.sampled_from(CFG_PATHS), st.one_of(JSON_VALUES, st.just("DELETE"))),
                 min_size=1, max_size=3)
CORRUPT = st.sampled_from([None] * 12 + ["truncate", "non-utf8", "digits", "deep", "nan", "array"])


@settings(FUZZ, max_examples=examples("configs"))
@given(
    base=BASE_INDEX,
    edits=EDITS,
    corrupt=CORRUPT,
    engine=st.sampled_from(["vllm", "vllm", "sglang", "tgi"]),
    encoding=ENCODINGS,
)
def test_fuzz_config_json(world, base, edits, corrupt, engine, encoding):
    raw = config_bytes(base, edits, corrupt)
    d = world.base / "cfg"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_bytes(raw)
    code, out, err = invoke(world, "plan", str(d), "--gpu", "h100", "--engine", engine, "--json",
                            encoding=encoding)
    if code == 2:
        assert "config.json" in err or "--" in err, err  # the file (and field), or a flag


# --------------------------------------------------------------- safetensors

DTYPES = ["BF16", "F16", "F32", "F8_E4M3", "I32", "U8", "I64", "BOOL", "Q4", "", None, 7]
TENSOR_NAMES = [
    "model.embed_tokens.weight",
    "lm_head.weight",
    "model.norm.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.3.mlp.gate_proj.weight",
    "model.layers.9999.mlp.up_proj.weight",
    "model.layers.0.self_attn.o_proj.weight",
    "vision_tower.x.weight",
    "__metadata__",
    "model.layers.1.self_attn.k_proj.weight_scale",
]
SHAPES = st.one_of(st.lists(st.integers(0, 4096), max_size=3),
                   st.lists(st.sampled_from([-1, 2**48, 2**70, 0, 1]), max_size=3),
                   st.sampled_from([None, "4096", [1.5], [True], {}]),
                   st.lists(st.integers(1, 8), min_size=9, max_size=10))
TENSOR = st.fixed_dictionaries({"dtype": st.sampled_from(DTYPES), "shape": SHAPES,
                                "data_offsets": st.just([0, 0])})


TENSORS = st.dictionaries(st.sampled_from(TENSOR_NAMES) | SHORT_TEXT, TENSOR | JSON_VALUES,
                          max_size=6)
LENGTHS = st.sampled_from(["exact", "exact", "exact", "huge", "short", "zero", "raw"])


def header_bytes(tensors: dict, length: str, raw: bytes) -> bytes:
    """A safetensors file: `tensors` as its header, its length field exact or lying, or `raw`."""
    header = json.dumps(tensors).encode()
    n = {"exact": len(header), "huge": 2**62, "short": max(len(header) - 3, 0), "zero": 0}.get(
        length, 0
    )
    return raw if length == "raw" else struct.pack("<Q", n) + header + b"\0" * 64


@settings(FUZZ, max_examples=examples("headers"))
@given(
    tensors=TENSORS,
    length=LENGTHS,
    raw=st.binary(max_size=64),
    index=st.sampled_from(
        [None, None, "ok", "../secret", "/etc/hostname", "missing.safetensors", 7, "sub/../../x",
         "OUTSIDE"]
    ),
    fifo=st.sampled_from([False] * 20 + [True]),
)
def test_fuzz_safetensors_headers(world, tensors, length, raw, index, fifo):
    d = world.base / "st"
    if d.exists():
        for f in d.iterdir():
            f.unlink()
    else:
        d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY))
    (world.base / "secret").write_bytes(b"hf_SECRETTOKEN")
    body = header_bytes(tensors, length, raw)
    shard = "model-00001-of-00001.safetensors" if index else "model.safetensors"
    if fifo and hasattr(os, "mkfifo"):
        os.mkfifo(d / shard)
    else:
        (d / shard).write_bytes(body)
    if index is not None:
        target = {"ok": shard, "OUTSIDE": str(world.outside / "token")}.get(index, index)
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": target}}))
    code, out, err = invoke(world, "plan", str(d), "--gpu", "h100", "--json")
    assert "SECRET" not in out + err and str(struct.unpack("<Q", b"hf_SECRE")[0]) not in out + err
    if code == 2:
        assert str(d) in err, err


# ----------------------------------------------------------- deployment files

ENTRYPOINTS = [
    "vllm serve",
    "python -m vllm.entrypoints.openai.api_server --model",
    "python3 -m sglang.launch_server --model-path",
    "text-generation-launcher --model-id",
    "exec vllm serve",
    "RUN vllm serve",
    'CMD ["vllm", "serve",',
]
FILE_MODELS = [
    "qwen2.5-0.5b",
    "Qwen/Qwen2.5-7B-Instruct",
    "/models/Llama-3.1-8B",
    "./tiny",
    "tiny",
    "~/x",
    "../x",
    "/dev/zero",
    "{{ .Values.model }}",
    "${MODEL}",
    "${MODEL:-qwen2.5-7b}",
    "acme/not-cached",
    "'unclosed",
    "@OUT@/model",  # the folder outside the boundary (World.outside)
    "./link-out/model",  # a symlink in the repository to that folder
    "link-out/../tiny",
]
# Credentials a deployment file may hold: never printed (redacted) in any format.
CREDENTIALS = [("--api-key", PLANTED[1]), ("--hf-token", PLANTED[0]), ("--api-key", PLANTED[2]),
               ("--api-key=" + PLANTED[2], None), ("--hf-token=" + PLANTED[0], None)]
# Draft models outside the boundary, by every engine's spelling.
DRAFT_FLAGS = [("--speculative-config", '{"model": "@OUT@/draft", "method": "eagle3", '
                '"num_speculative_tokens": 2}'),
               ("--speculative-config", '{"model": "./link-out/draft", "method": "eagle3"}'),
               ("--speculative-draft-model-path", "@OUT@/draft"),
               ("--speculative-draft-model-path", "../../link-out/draft")]
FILE_FLAGS = ["-tp", "--tensor-parallel-size", "--max-model-len", "--max-num-seqs", "--dtype",
              "--gpu-memory-utilization", "--kv-cache-dtype", "--block-size", "--tp-size",
              "--context-length", "--mem-fraction-static", "--num-shard", "--max-total-tokens",
              "--max-input-tokens", "--cuda-memory-fraction", "--enforce-eager", "--unknown-flag",
              "--kv-cache-memory-bytes", "--max-num-batched-tokens", "-q"]
FILE_VALUES = st.one_of(
    FLAG_TEXT,
    st.sampled_from(
        [
            "{{ x }}",
            "{{ {{ {{",
            "${X:-4}",
            "$X",
            "'a b'",
            "\\",
            '"',
            "&&",
            "|",
            "#",
            "32K",
            "1.5k",
            "--",
            "\u00b2",
            "\u0663",
            "\u0663.\u0665",
            "x\x00y",
            "\u00bd",
        ]
    ),
)
DIRECTIVES = st.sampled_from(
    [
        "",
        "",
        "",
        "# kvplan: gpu=h100\n",
        "# kvplan: gpu=nosuch\n",
        "# kvplan: engine-version=0.1" + "a" * 30 + "!\n",
        "# kvplan: bogus=1\n",
        "# kvplan: model=qwen2.5-7b gpu-count=2\n",
        "# kvplan: engine-version=0.19.0\n",
        "# kvplan: gpu-count=99999999999\n",
        "# kvplan: gpu-count=\u00b2\n",
        "# kvplan: gpu-count=" + "9" * 5000 + "\n",
    ]
)


@st.composite
def command(draw) -> str:
    entry = draw(st.sampled_from(ENTRYPOINTS))
    parts = [entry, draw(st.sampled_from(FILE_MODELS))]
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(FILE_FLAGS))
        value = draw(FILE_VALUES)
        parts.append(draw(st.sampled_from([f"{flag} {value}", f"{flag}={value}", flag])))
    for flag, value in draw(st.lists(st.sampled_from(CREDENTIALS + DRAFT_FLAGS), max_size=2)):
        parts += [flag] if value is None else [flag, shlex.quote(value)]
    text = " ".join(parts)
    if entry.startswith("CMD ["):
        text = entry + ", ".join(json.dumps(p) for p in parts[1:]) + "]"
    text = draw(st.sampled_from(["", "", f"HF_TOKEN={PLANTED[0]} "])) + text
    return text + draw(
        st.sampled_from(["", "", " && echo done", " \\\n  --max-num-seqs 8", " | tee log"])
    )


def _yaml_str(s: str) -> str:
    return json.dumps(s)


@st.composite
def deployment_file(draw) -> tuple[str, str]:
    kind = draw(
        st.sampled_from(
            [
                "sh",
                "sh",
                "Dockerfile",
                "k8s",
                "compose",
                "compose",
                "vllm-config",
                "yaml-noise",
                "alias",
            ]
        )
    )
    head = draw(DIRECTIVES)
    cmds = draw(st.lists(command(), min_size=1, max_size=3))
    if kind in ("sh", "Dockerfile"):
        name = "run.sh" if kind == "sh" else "Dockerfile"
        image = draw(st.sampled_from(["", "FROM vllm/vllm-openai:v0.19.0\n", "FROM x:latest\n"]))
        return name, head + image + "\n".join(cmds) + "\n"
    if kind == "k8s":
        args = draw(st.lists(FILE_VALUES | st.sampled_from(FILE_FLAGS + FILE_MODELS
                                                           + list(PLANTED[:2])), max_size=6))
        gpu = draw(
            st.sampled_from(
                [
                    "1",
                    "2",
                    "8",
                    "x",
                    "-1",
                    "99999999999999999999",
                    "{{ .Values.gpus }}",
                    "\u00b2",
                    "9" * 5000,
                    "\u0663",
                ]
            )
        )
        product = draw(st.sampled_from(["NVIDIA-H100-80GB-HBM3", "no-such", "", "NVIDIA-L4"]))
        text = (
            f"{head}apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n"
            f"      nodeSelector:\n        nvidia.com/gpu.product: {_yaml_str(product)}\n"
            f"      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.19.0\n"
            f"          args: [{', '.join(_yaml_str(a) for a in ['qwen2.5-7b', *args])}]\n"
            f"          env: [{{name: HF_TOKEN, value: {PLANTED[0]}}}]\n"
            f"          resources:\n            limits:\n"
            f"              nvidia.com/gpu: {_yaml_str(gpu)}\n"
        )
        return "deploy.yaml", text
    if kind == "compose":
        services = []
        for i, c in enumerate(cmds):
            form = draw(st.sampled_from(["string", "list", "image-args"]))
            if form == "string":
                body = f"    command: {_yaml_str(c)}\n"
            elif form == "list":
                body = f"    command: [{', '.join(_yaml_str(t) for t in c.split())}]\n"
            else:
                body = (f"    image: vllm/vllm-openai:v0.8.5\n    command: "
                        f"[{', '.join(_yaml_str(t) for t in c.split()[2:])}]\n")
            gpus = "    deploy: {resources: {reservations: {devices: [{count: 2}]}}}\n"
            count = draw(
                st.sampled_from(
                    [
                        "",
                        gpus,
                        "    deploy: [[[[1]]]]\n",
                        gpus.replace("2", '"\u00b2"'),
                        gpus.replace("2", "9" * 5000),
                    ]
                )
            )
            services.append(f"  s{i}:\n{body}{count}")
        return "docker-compose.yaml", head + "services:\n" + "".join(services)
    if kind == "vllm-config":
        keys = draw(
            st.lists(
                st.tuples(
                    st.sampled_from([f.lstrip("-").replace("-", "_") for f in FILE_FLAGS]),
                    FILE_VALUES,
                ),
                max_size=4,
            )
        )
        body = "".join(f"{k}: {_yaml_str(v)}\n" for k, v in keys)
        model = _yaml_str(draw(st.sampled_from(FILE_MODELS)))
        return "config.yaml", f"{head}model: {model}\ntensor_parallel_size: 1\n{body}"
    if kind == "alias":
        depth = draw(st.integers(1, 8))
        lines = ['a0: &a0 ["x", "y", "z", "w"]']
        for i in range(1, depth):
            lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 8) + "]")
        tail = draw(st.sampled_from([f"spec:\n  containers: *a{depth - 1}\n",
                                     f"spec:\n  affinity: *a{depth - 1}\n  containers: []\n",
                                     "r: &r [*r]\n", "m: &m {k: *m}\n"]))
        return "bomb.yaml", "\n".join(lines) + "\n" + tail
    noise = draw(st.text(st.sampled_from("abc:-[]{}&*!|>'\"\n #%@`\t,?0"), max_size=200))
    return "noise.yaml", head + noise


POLICIES = [None, None, None, "min_concurrency = 4\n", "min_concurency = 4\n", "[[[[\n",
            'gpu = "h100"\n', "LINK-OUT", "min_headroom_gib = inf\n"]


def checked_repo(world: World, files: dict[str, str], policy: str | None = None) -> Path:
    """A fresh repository under world.base holding `files` (with @OUT@ naming the outside
    folder), a model `tiny/`, `link-out` (a symlink to the outside folder) and a kvplan.toml."""
    repo = world.base / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir()
    tiny_dir(repo)
    (repo / "link-out").symlink_to(world.outside)
    for name, text in files.items():
        (repo / name).write_text(text.replace("@OUT@", str(world.outside)),
                                 errors="surrogatepass")
    if policy == "LINK-OUT":
        (repo / "kvplan.toml").symlink_to(world.outside / "token")
    elif policy is not None:
        (repo / "kvplan.toml").write_text(policy)
    link = world.base / "repo-link"  # a symlinked directory: the repository under another name
    if not link.is_symlink():
        link.symlink_to(repo)
    return repo


def check_in(world: World, repo: Path, where: str, name: str, *flags: str,
             encoding: str = "utf-8") -> tuple[int, str, str]:
    """`kvplan check` on `name` in `repo`: from the repository (the file or `.`), from its parent
    directory, or through a symlinked directory. The boundary is the checked path (and the
    working directory's own policy files), never the rest of world.base."""
    cwd, target = {"file": (repo, name), "dir": (repo, "."),
                   "parent": (repo.parent, f"{repo.name}/{name}"),
                   "linked": (repo.parent, f"repo-link/{name}")}[where]
    policies = (cwd / "kvplan.toml", cwd / "pyproject.toml")
    return contract("check", target, *flags, cwd=cwd, allowed=(repo, *policies),
                    encoding=encoding)


@settings(FUZZ, max_examples=examples("files"))
@given(
    file=deployment_file(),
    gpu=st.sampled_from(["h100", "h100", "l4", "nosuch"]),
    sets=st.lists(
        st.sampled_from(["model=qwen2.5-7b", "gpus=2", "x=", "MODEL=tiny", "X=4"]), max_size=2
    ),
    fmt=st.sampled_from(["json", "json", "table", "github", "markdown"]),
    where=st.sampled_from(["file", "file", "dir", "parent", "linked"]),
    policy=st.sampled_from(POLICIES),
    encoding=ENCODINGS,
)
def test_fuzz_deployment_files(world, file, gpu, sets, fmt, where, policy, encoding):
    name, text = file
    repo = checked_repo(world, {name: text}, policy)
    args = ["--gpu", gpu, "--format", fmt]
    for s in sets:
        args += ["--set", s]
    code, out, err = check_in(world, repo, where, name, *args, encoding=encoding)
    if not out:  # a usage error before any file was read
        assert code == 2 and names_something(err), err
        return
    if fmt == "github":  # one workflow command per line: a file cannot inject another
        assert all(line.startswith(("::", "kvplan check:")) for line in out.splitlines()), out
    if fmt != "json":
        return
    report = json.loads(out)
    if "error" in report:  # a bad policy or flag: one error object, exit 2
        assert code == 2 and report["error"]["message"], report
        return
    assert report["exit_code"] == code
    for row in report["deployments"]:
        if where != "dir":
            assert name in row["file"]
        if row["status"] == "error":
            assert row["problems"] and row["problems"][0]["message"].strip()
            assert "internal error" not in row["problems"][0]["message"]


# ------------------------------------------- structured flags, exec forms, odd YAML keys
# Issue #22 item 12: deep JSON in every JSON flag (command line and deployment file), deep and
# odd YAML in every YAML input (--extra-llm-api-options, deployment YAML, --prices), Dockerfile
# exec forms holding non-strings. A bad input is exit 2 naming it; in `check` a finding of its
# own line while the other file is still checked.

JSON_FLAGS = ["--speculative-config", "--limit-mm-per-prompt"]
DEPTHS = [0, 1, 2, 31, 32, 33, 64, 101, 3000, 50_000]
ODD_KEYS = ["? [x]\n: 1\n", "? {a: 1}\n: 2\n", "~: 1\n", "1: 2\n", "true: x\n",
            '"": 1\n', "? !!binary aGk=\n: 1\n", "<<: {model: x}\n", "? |\n  multi\n: 1\n",
            "? [[[x]]]\n: [1]\n", "? &k [a]\n: 1\nb: *k\n"]
GOOD_LINE = "vllm serve qwen2.5-0.5b --max-model-len 4096\n"


@st.composite
def nested_json(draw) -> str:
    """JSON nested `depth` levels (lists, objects or both), sometimes unbalanced or with
    brackets inside strings that must not count."""
    depth = draw(st.sampled_from(DEPTHS))
    kind = draw(st.sampled_from(["list", "object", "mixed", "string-brackets"]))
    leaf = json.dumps(draw(JSON_VALUES))
    if kind == "string-brackets":
        return '{"image": 1, "x": "' + "[{" * depth + '"}'
    if kind == "mixed" and depth <= 200:
        opens = draw(st.lists(st.booleans(), min_size=depth, max_size=depth))
    else:
        opens = [kind == "list"] * depth
    text = "".join("[" if o else '{"a": ' for o in opens) + leaf
    text += "".join("]" if o else "}" for o in reversed(opens))
    cut = draw(st.sampled_from([None] * 6 + ["half", "one"]))
    return text[: len(text) // 2] if cut == "half" else text[:-1] if cut == "one" and text else text


@st.composite
def yaml_text(draw) -> str:
    """YAML that nests deeply (flow or block style), or holds keys that are not names."""
    form = draw(st.sampled_from(["flow", "block", "odd-key", "odd-key", "odd-value"]))
    depth = draw(st.sampled_from(DEPTHS))
    if form == "flow":
        return "a: " + "[" * depth + "1" + "]" * depth + "\n"
    if form == "block":
        return "".join("  " * i + f"k{i}:\n" for i in range(min(depth, 400))) + "  " * min(
            depth, 400) + "v\n"
    if form == "odd-value":
        return "a: " + draw(st.sampled_from(["!!python/object:os.system x", "*undefined",
                                             "&a [*a]", "!!set {a, b}", "2001-12-14", ".nan",
                                             "[" * 3000]))
    return draw(st.sampled_from(ODD_KEYS)) + draw(st.sampled_from(["", "model: x\n",
                                                                   "max_num_tokens: 8\n"]))


@st.composite
def exec_form(draw) -> str:
    """A Dockerfile CMD / ENTRYPOINT exec form whose items may not be strings."""
    items = draw(st.lists(JSON_VALUES | st.sampled_from(["vllm", "serve", "sh", "-c"]),
                          max_size=5))
    head = draw(st.sampled_from([["sh", "-c"], ["vllm", "serve"], ["/bin/bash", "-c"], []]))
    nested = draw(st.sampled_from([None] * 4 + ["deep"]))
    body = json.dumps(head + items)
    if nested == "deep":
        body = "[" * 3000 + '"vllm"' + "]" * 3000
    return draw(st.sampled_from(["CMD", "ENTRYPOINT", "RUN"])) + " " + body


@st.composite
def structured_case(draw) -> tuple[str, str, str]:
    kind = draw(st.sampled_from(["flag-json", "file-json", "options-yaml", "dockerfile",
                                 "deploy-yaml", "prices"]))
    if kind in ("flag-json", "file-json"):
        return kind, draw(st.sampled_from(JSON_FLAGS)), draw(nested_json())
    if kind == "dockerfile":
        return kind, "Dockerfile", "FROM x\n" + draw(exec_form()) + "\n"
    if kind == "deploy-yaml":
        where = draw(st.sampled_from(["config", "compose", "k8s", "spec"]))
        odd = draw(yaml_text())
        text = {"config": "model: qwen2.5-0.5b\nmax_model_len: 4096\n" + odd,
                "compose": "services:\n  s:\n    command: [vllm, serve, qwen2.5-0.5b]\n"
                           "    environment:\n" + "".join("      " + line + "\n" for line in
                                                          odd.splitlines()),
                "k8s": "apiVersion: v1\nkind: Pod\n" + odd,
                "spec": "model: qwen2.5-0.5b\nspeculative_config:\n" + "".join(
                    "  " + line + "\n" for line in odd.splitlines())}[where]
        return kind, "deploy.yaml", text
    if kind == "prices":
        csv_row = draw(st.sampled_from(['"' + "x" * 140_000 + '",1', "h100," + "1" * 140_000,
                                        'h100,"2', "h100,2,\x00", "[[[,1"]))
        name = draw(st.sampled_from(["prices.yaml", "prices.csv"]))
        text = draw(yaml_text()) if name.endswith("yaml") else "id,usd_per_hour\n" + csv_row
        return kind, name, text
    return kind, "opts.yaml", draw(yaml_text())


@settings(FUZZ, max_examples=examples("structured"))
@given(case=structured_case(), engine=st.sampled_from(["vllm", "vllm", "sglang"]),
       special=st.sampled_from([None] * 8 + ["/dev/zero", "link-out", "fifo"]))
def test_fuzz_structured_inputs(world, case, engine, special):
    kind, name, text = case
    repo = world.base / "structured"
    repo.mkdir(exist_ok=True)
    for f in repo.iterdir():
        f.unlink()
    if kind == "flag-json":
        code, _, err = invoke(world, "plan", "qwen2.5-0.5b", "--gpu", "h100", "--engine", engine,
                              name, text, "--json")
        if code == 2:
            assert names_something(err, name), err
        return
    if kind == "file-json":
        (repo / "run.sh").write_text(f"vllm serve qwen2.5-0.5b {name} {shlex.quote(text)}\n")
        name = "run.sh"
    elif special == "link-out" and kind in ("options-yaml", "prices"):  # the user named it
        (repo / name).symlink_to(world.outside / "token")
    elif special == "fifo" and kind in ("options-yaml", "prices"):
        os.mkfifo(repo / name)
    else:
        (repo / name).write_text(text)
    path = "/dev/zero" if special == "/dev/zero" and kind in ("options-yaml", "prices") else str(
        repo / name)
    named = (world.outside, Path(path)) if special else ()
    if kind == "options-yaml":
        code, _, err = invoke(world, "plan", "qwen2.5-0.5b", "--gpu", "h100", "--engine",
                              "trtllm", "--extra-llm-api-options", path, allowed=named)
        if code == 2:
            assert name in err or path in err, err
        return
    if kind == "prices":
        code, _, err = invoke(world, "sweep", "qwen2.5-0.5b", "--gpus", "h100", "--max-gpus", "1",
                              "--prices", path, allowed=named)
        if code == 2:
            assert name in err or path in err, err
        return
    (repo / "good.sh").write_text(GOOD_LINE)  # one bad file never hides another
    code, out, err = contract("check", path, str(repo / "good.sh"), "--gpu", "h100", "--json",
                              cwd=repo, allowed=(repo,))
    report = json.loads(out)
    good = [d for d in report["deployments"] if d["file"].endswith("good.sh")]
    assert [d["status"] for d in good] == ["fits"], (report, err)
    for row in report["deployments"]:
        for problem in row["problems"]:
            assert "internal error" not in problem["message"]


# ------------------------------------------------------------- a hostile Hub on 127.0.0.1
# tests/fakehub.py serves what each input generates: mutated configs, lying safetensors headers,
# indexes that point elsewhere, gated repositories; HF_TOKEN holds a planted token.

@pytest.fixture(scope="module")
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub(token=PLANTED[0])
    hub.start()
    yield hub
    hub.stop()


@settings(FUZZ, max_examples=examples("hub"))
@given(base=BASE_INDEX, edits=EDITS, corrupt=CORRUPT, tensors=TENSORS, length=LENGTHS,
       raw=st.binary(max_size=64),
       index=st.sampled_from([None, "ok", "../../config.json", "/etc/hostname", "OUTSIDE"]),
       gated=st.sampled_from([False] * 4 + [True]), revision=st.sampled_from(["main", "v9"]),
       encoding=ENCODINGS)
def test_fuzz_hostile_hub(world, fake_hub, monkeypatch, base, edits, corrupt, tensors, length,
                          raw, index, gated, revision, encoding):
    import huggingface_hub.constants

    shard = "model-00001-of-00001.safetensors" if index else "model.safetensors"
    files = {"config.json": config_bytes(base, edits, corrupt),
             shard: header_bytes(tensors, length, raw)}
    if index:
        target = {"ok": shard, "OUTSIDE": str(world.outside / "token")}.get(index, index)
        files["model.safetensors.index.json"] = json.dumps({"weight_map": {"w": target}}).encode()
    repo_id = f"acme/m{len(fake_hub.repos)}"
    fake_hub.repos[repo_id] = FakeRepo({"main": files}, gated=gated)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{fake_hub._server.server_address[1]}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_TOKEN", PLANTED[0])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    code, out, err = invoke(world, "plan", repo_id, "--gpu", "h100", "--revision", revision,
                            "--json", encoding=encoding)
    if code == 2:
        assert names_something(err, repo_id), err


# ------------------------------------------------------------------------------ the campaign


def test_the_campaign_runs_at_least_five_thousand_inputs():
    campaign = settings.get_profile("campaign")
    assert set(SHARES) == {"flags", "configs", "headers", "files", "structured", "containment",
                           "hub"}  # every fuzzed property (containment: test_untrusted.py)
    assert sum(examples(p, campaign) for p in SHARES) >= 5000
    assert sum(examples(p, settings.get_profile("default")) for p in SHARES) < 120  # quick pass


# ------------------------------------------------------------------ peak memory per run
# The heaviest inputs the campaign knows, each in its own process (PYTHONIOENCODING=ascii and a
# C locale for some): the peak resident set (VmHWM, else getrusage's ru_maxrss) must stay under
# 1 GiB, and so must its growth over the imports. The README's pytest runs the first; the
# campaign runs all.

_MEASURE = """
import re, resource, sys
def peak_kib():  # VmHWM starts afresh at exec; ru_maxrss keeps the forking parent's peak
    try:
        return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from kvplan import cli
before = peak_kib()
sys.argv = ["kvplan", *sys.argv[1:]]
code = 0
try:
    cli.main()
except SystemExit as e:
    code = e.code
sys.__stderr__.write(f"\\nRSS {before} {peak_kib()} {code}\\n")
"""


def _heavy(base: Path, case: str) -> tuple[list[str], dict[str, str]]:
    """The command line (and extra environment) of one heavy input, its files under `base`."""
    ascii_c = {"PYTHONIOENCODING": "ascii", "LC_ALL": "C"}
    if case == "prices-dev-zero":
        return ["sweep", "qwen2.5-7b", "--prices", "/dev/zero", "--json"], ascii_c
    if case == "sweep-every-gpu":
        return ["sweep", "qwen3-30b-a3b", "--max-gpus", "8", "--json"], {}
    if case.startswith("header-"):  # 35 M empty lists within the 100 MiB header limit, or as
        n = 34_900_000 if case == "header-35m-values" else 2_490_000  # many as MAX_JSON_VALUES

        d = base / case
        d.mkdir(exist_ok=True)
        (d / "config.json").write_text(json.dumps(TINY))
        header = b'{"a":[' + b"[]," * (n - 1) + b"[]]}"
        (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
        return ["plan", str(d), "--gpu", "h100", "--json"], {}
    if case == "deep-and-bombs":
        repo = base / "heavy-repo"
        repo.mkdir(exist_ok=True)
        (repo / "deep.json.sh").write_text(
            "vllm serve qwen2.5-0.5b --speculative-config '" + "[" * 50_000 + "]" * 50_000 + "'\n")
        lines = ['a0: &a0 ["x", "y", "z", "w"]'] + [
            f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 8) + "]" for i in range(1, 9)]
        (repo / "bomb.yaml").write_text("\n".join(lines) + "\nspec:\n  containers: *a8\n")
        (repo / "big.sh").write_text(GOOD_LINE * 20_000)
        return ["check", str(repo), "--gpu", "h100", "--format", "github"], ascii_c
    return ["report", "qwen3-30b-a3b", "--gpu", "h100", "-o", str(base / "heavy.html")], ascii_c


HEAVY = ["prices-dev-zero", "sweep-every-gpu", "header-35m-values", "header-2.5m-lists",
         "deep-and-bombs", "report-html"]


@pytest.mark.parametrize("case", HEAVY)
def test_peak_memory_of_the_heaviest_inputs_stays_under_one_gib(world, case):
    import subprocess
    import sys

    if case != HEAVY[0] and settings().max_examples < 1000:
        pytest.skip("the campaign profile measures every heavy input (.ci/run)")
    args, env = _heavy(world.base, case)
    done = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True,
                          text=True, timeout=120, cwd=world.cwd, env={**os.environ, **env})
    line = [x for x in done.stderr.splitlines() if x.startswith("RSS ")][-1]
    before_kib, peak_kib, code = line.split()[1:]
    print(f"{case}: exit {code}, peak {int(peak_kib) // 1024} MiB "
          f"({(int(peak_kib) - int(before_kib)) // 1024} MiB over the imports)")
    assert code in ("0", "1", "2", "3"), done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert int(peak_kib) < 1024 * 1024, f"{case}: peak {int(peak_kib) // 1024} MiB"
    assert int(peak_kib) - int(before_kib) < 1024 * 1024
