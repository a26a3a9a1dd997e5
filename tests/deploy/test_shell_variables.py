"""Variables in a deployment's shell script take the values the shell would give them: the
container's `env` (plain values and ConfigMaps), a script's own assignments and exports above the
line, then a `${VAR:-default}`'s default (kvplan/deploy/shell_vars.py). Every expected value
below is worked out by hand from POSIX parameter expansion (Shell Command Language 2.6.2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clirun import run

from kvplan.deploy.commands import Templates, find_commands
from kvplan.deploy.manifests import manifest_commands
from kvplan.deploy.shell_vars import expand

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "deploy"

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: c}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          %(env)s
          command: ["/bin/sh", "-c"]
          args: ['%(script)s']
          resources: {limits: {nvidia.com/gpu: "1"}}
"""
CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {LEN: "8000", M: qwen2.5-7b}
---
"""


def read(tmp_path: Path, name: str, text: str) -> list:
    """Every command kvplan reads from the file, as `kvplan check` reads it."""
    path = tmp_path / name
    path.write_text(text)
    templates = Templates({})
    return manifest_commands(path, find_commands(path, templates), templates)


def deployment(env: str, script: str, configmap: bool = False) -> str:
    return (CONFIGMAP if configmap else "") + DEPLOYMENT % {"env": env, "script": script}


PLAIN_ENV = 'env: [{name: LEN, value: "8000"}, {name: M, value: qwen2.5-7b}]'
CONFIGMAP_ENV = "envFrom: [{configMapRef: {name: cm}}]"


@pytest.mark.parametrize("env, configmap", [(PLAIN_ENV, False), (CONFIGMAP_ENV, True)],
                         ids=["plain-env", "configmap"])
def test_sh_c_default_gives_way_to_the_containers_env(tmp_path, env, configmap):
    """`${LEN:-40960}` with LEN=8000 in the container's env is 8000, as the shell reads it."""
    text = deployment(env, "vllm serve qwen2.5-7b --max-model-len ${LEN:-40960}", configmap)
    [found] = read(tmp_path, "d.yaml", text)
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == 8000


@pytest.mark.parametrize("reference", ["$M", "${M}", "${M:-other/model}", "${M-other/model}"])
@pytest.mark.parametrize("env, configmap", [(PLAIN_ENV, False), (CONFIGMAP_ENV, True)],
                         ids=["plain-env", "configmap"])
def test_sh_c_variables_resolve_from_the_containers_env(tmp_path, reference, env, configmap):
    """Every spelling of a variable the container sets is its value (M=qwen2.5-7b), whether
    the workload also reads a ConfigMap or not."""
    text = deployment(env, f"vllm serve {reference} --max-model-len 9000", configmap)
    [found] = read(tmp_path, "d.yaml", text)
    assert found.error is None, found.error
    assert found.model == "qwen2.5-7b"


def test_sh_c_default_applies_when_the_env_does_not_set_it(tmp_path):
    [found] = read(tmp_path, "d.yaml", deployment(
        'env: [{name: OTHER, value: "1"}]', "vllm serve qwen2.5-7b --max-model-len ${LEN:-4096}"))
    assert found.knobs["max_model_len"] == 4096


@pytest.mark.parametrize("script, value", [
    # `export` and a plain assignment above the line both set what the shell expands
    ("export LEN=8000\nvllm serve qwen2.5-7b --max-model-len ${LEN:-40960}\n", 8000),
    ("LEN=8000\nvllm serve qwen2.5-7b --max-model-len $LEN\n", 8000),
    ("BASE=4000\nLEN=$((BASE * 2))\nvllm serve qwen2.5-7b --max-model-len ${LEN}\n", 8000),
    # `:-` takes the default when the variable is empty, `-` only when it is unset
    ("LEN=\nvllm serve qwen2.5-7b --max-model-len ${LEN:-2048}\n", 2048),
    ("LEN=\nvllm serve qwen2.5-7b --max-model-len 1${LEN-2048}\n", 1),
])
def test_script_assignments_above_the_line(tmp_path, script, value):
    path = tmp_path / "run.sh"
    path.write_text(script)
    [found] = find_commands(path, Templates({}))
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == value


def test_export_in_the_script_wins_over_the_default_end_to_end(capsys, tmp_path):
    """The auditor's s5.sh: planned at the exported 8000, not the default 40960."""
    path = tmp_path / "run.sh"
    path.write_text("# kvplan: gpu=h100\nexport LEN=8000\n"
                    "vllm serve qwen2.5-7b --max-model-len ${LEN:-40960}\n")
    code, out, _ = run(capsys, "check", str(path), "--json", "--offline")
    [d] = json.loads(out)["deployments"]
    assert code == 0, d
    assert d["plan"]["inputs"]["max_model_len"]["value"] == 8000


@pytest.mark.parametrize("script, missing", [
    ("vllm serve ${M} --max-model-len 9000", "${M}"),  # set nowhere
    ("vllm serve ''$M'' --max-model-len 9000", "$M"),  # single quotes: never expanded
])
def test_unresolvable_variable_is_named(tmp_path, script, missing):
    """A variable nothing sets is an error naming it, with the ways to set it (not Helm's)."""
    text = deployment('env: [{name: OTHER, value: "1"}]', script)
    [found] = read(tmp_path, "d.yaml", text)
    assert found.error is not None
    message = f"{found.error.detail} {found.error.hint}"
    assert f"the unexpanded variable {missing}" in message
    assert "--set M=VALUE" in message and "helm" not in message


def test_assignment_below_the_line_does_not_count(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("vllm serve qwen2.5-7b --max-model-len $LEN\nLEN=8000\n")
    [found] = find_commands(path, Templates({}))
    assert found.error is not None and "$LEN" in found.error.detail


@pytest.mark.parametrize("text, expected", [
    ("a $X ${X} ${X:-d} ${X-d}", "a 3 3 3 3"),
    ("${U:-d} ${U-d} ${E:-d} ${E-d}|", "d d d |"),  # U unset, E empty
    ("'$X' \"$X\" \\$X $U ${U}", "'$X' \"3\" \\$X $U ${U}"),
    ("$((X * 2)) $(( ${X:-0} + N ))", "6 5"),
])
def test_expand_follows_posix_parameter_expansion(text, expected):
    assert expand(text, {"X": "3", "E": "", "N": "2"}) == expected


def test_expanded_value_is_one_word_in_double_quotes(tmp_path):
    """`"$M"` with a space in M stays one argument; unquoted it splits, as the shell does."""
    import shlex

    variables = {"M": "a b"}
    assert shlex.split(expand('x "$M"', variables)) == ["x", "a b"]
    assert shlex.split(expand("x $M", variables)) == ["x", "a", "b"]
    assert shlex.split(expand("x $Q", {"Q": "it's"})) == ["x", "it's"]


def test_example_with_lws_address_left_as_written():
    """wide-ep-decode-lws.yaml: `--data-parallel-address ${LWS_LEADER_ADDRESS}` (LWS injects it
    at run time) is kept as the file wrote it; START_RANK, assigned above the line from
    LWS_WORKER_INDEX 0 × DP_SIZE_LOCAL 8, is 0."""
    path = EXAMPLES / "llm-d" / "wide-ep-decode-lws.yaml"
    templates = Templates({})
    [found] = manifest_commands(path, find_commands(path, templates), templates)
    kept = [str(a) for a in found.unknown_flags]
    assert "--data-parallel-address ${LWS_LEADER_ADDRESS}" in kept
    assert "--data-parallel-start-rank 0" in kept
    assert not any("__kvplan" in a for a in kept)


# ------------------------------------------------------ nested defaults (POSIX 2.6.2)
# A default's word is expanded in turn, and only when the default is taken; a `}` closes the
# innermost `${` still open. Worked by hand with X=3, E set but empty, U and V unset.
NESTED = {"X": "3", "E": ""}


@pytest.mark.parametrize("text, expected", [
    ("${U:-${X:-1}}", "3"),  # U unset → the word ${X:-1} → X is 3
    ("${U:-${V:-1}}", "1"),  # U and V unset → 1
    ("${U:-${V:-${X}}}", "3"),  # three deep
    ("${E:-${X}}", "3"),  # `:-` takes the word for an empty E
    ("${E-${X}}|", "|"),  # `-` does not: E is set (empty)
    ("${U-${X}}", "3"),  # U is unset, so `-` takes it
    ("${U:-$X}", "3"),  # the word is a bare $X
    ("${X:-$U}", "3"),  # X is set: the word (naming unset U) is never expanded
    ("${U:-x${X}y}", "x3y"),  # the word around an inner expansion
    ("${U:-{a}}", "{a}"),  # the first `}` closes ${U:-{a → the word `{a`, then a literal `}`
    ("${X:-{a}}", "3}"),  # … so with X set: 3, then that `}`
    ("'${U:-${X}}'", "'${U:-${X}}'"),  # single quotes: never expanded
    ("\\${U:-${X}}", "\\${U:-3}"),  # `\$` is not an expansion; the ${X} after it is
    ("$(( ${U:-${X:-0}} * 2 ))", "6"),  # inside arithmetic: 3 × 2
])
def test_expand_resolves_nested_defaults_as_posix_sh(text, expected):
    assert expand(text, NESTED) == expected


@pytest.mark.parametrize("text, left", [
    ("${U:-${V}}", "${V}"),  # U unset → its word → V, which nothing sets: stays to be named
    ("${U-$V}", "$V"),
    ("${U:-a${V}b}", "a${V}b"),
])
def test_an_unknown_inner_variable_stays_as_written(text, left):
    assert expand(text, NESTED) == left


@pytest.mark.parametrize("script, value", [
    # the inner default takes the container's LEN (8000): MAX_LEN is set nowhere
    ("vllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-${LEN:-40960}}", 8000),
    ("vllm serve qwen2.5-7b --max-model-len ${MAX_LEN-${LEN}}", 8000),
    ("vllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-$LEN}", 8000),
    # nothing sets MAX_LEN or FALLBACK: the innermost default, 2048
    ("vllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-${FALLBACK:-2048}}", 2048),
    # the script's own assignment above the line is the inner value
    ("BASE=4096\nvllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-$BASE}", 4096),
])
def test_sh_c_nested_default_resolves_from_env_and_script(tmp_path, script, value):
    [found] = read(tmp_path, "d.yaml", deployment(PLAIN_ENV, script.replace("\n", "\n\n")))
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == value


@pytest.mark.parametrize("script, value", [
    ("vllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-${LEN:-2048}}\n", 2048),
    ("LEN=8000\nvllm serve qwen2.5-7b --max-model-len ${MAX_LEN-${LEN}}\n", 8000),
    ("LEN=8000\nvllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-$LEN}\n", 8000),
    ("vllm serve qwen2.5-7b --max-model-len ${A:-${B:-${C:-1024}}}\n", 1024),
    # MAX_LEN is set: its value, whatever the default would have been
    ("MAX_LEN=4096\nvllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-${LEN:-2048}}\n", 4096),
    ("MAX_LEN=4096\nvllm serve qwen2.5-7b --max-model-len ${MAX_LEN-${LEN}}\n", 4096),
])
def test_script_nested_default(tmp_path, script, value):
    """A shell script, expanded once as sh expands it."""
    path = tmp_path / "run.sh"
    path.write_text(script)
    [found] = find_commands(path, Templates({}))
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == value


def test_an_unresolvable_inner_variable_is_named(tmp_path):
    """`${MAX_LEN:-${OTHER}}` with neither set is the unexpanded ${OTHER}, named as any
    unset variable is, with the ways to set it."""
    text = deployment(PLAIN_ENV, "vllm serve qwen2.5-7b --max-model-len ${MAX_LEN:-${OTHER}}")
    [found] = read(tmp_path, "d.yaml", text)
    assert found.error is not None
    message = f"{found.error.detail} {found.error.hint}"
    assert "--max-model-len is the unexpanded variable ${OTHER}" in message
    assert "--set OTHER=VALUE" in message


def test_exec_form_nested_template_renders_its_innermost_default(tmp_path):
    """A compose `command` no shell runs: `${LEN:-${DEFAULT_LEN:-4096}}` renders as 4096, as
    Compose's interpolation (which nests) renders it with neither variable set."""
    path = tmp_path / "compose.yaml"
    path.write_text('services:\n  llm:\n    image: vllm/vllm-openai:${TAG:-${BASE:-v0.10.0}}\n'
                    '    command: ["vllm", "serve", "qwen2.5-7b", "--max-model-len",\n'
                    '              "${LEN:-${DEFAULT_LEN:-4096}}"]\n')
    [found] = find_commands(path, Templates({}))
    assert found.error is None, found.error
    assert found.knobs["max_model_len"] == 4096
    assert found.engine_version == "0.10.0"


def test_deep_nesting_stays_bounded():
    """`${a:-` 20,000 deep: 8 levels (MAX_NESTING) are expanded, each scanning the rest once,
    and what lies deeper is left as written (the check names it)."""
    text = "${a:-" * 20_000 + "x" + "}" * 20_000
    assert expand(text, {}) == "${a:-" * (20_000 - 8) + "x" + "}" * (20_000 - 8)
