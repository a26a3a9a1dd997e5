"""What kvplan keeps without modelling it (unknown flags, stray words) is shown as the file wrote
it: a Helm placeholder nobody filled (`{{ .Values.name }}`) stands for itself, never for the
sentinel kvplan parses it as."""

from __future__ import annotations

from kvplan.deploy.commands import Templates, find_commands


def test_unfilled_helm_placeholder_kept_as_written(tmp_path):
    """An unmodelled flag whose value is an unfilled `{{ … }}` is shown as the file wrote it."""
    path = tmp_path / "run.sh"
    path.write_text("vllm serve qwen2.5-7b --served-model-name {{ .Values.name }} "
                    "{{ .Values.x }}\n")
    [found] = find_commands(path, Templates({}))
    assert [str(a) for a in found.unknown_flags] == ["--served-model-name {{ .Values.name }}",
                                                     "{{ .Values.x }}"]
    assert "__kvplan" not in found.text
