"""The Knobs class spelled out for mypy (kvplan/knobs.py, under TYPE_CHECKING) is the model
create_model builds from OPTIONS: the same fields, in order, of the same types. A knob added to
OPTIONS without its line there (or with another type) fails here."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import kvplan.knobs as knobs


def _typed_fields() -> list[tuple[str, str]]:
    tree = ast.parse(Path(knobs.__file__).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Knobs":
            return [(s.target.id, ast.unparse(s.annotation)) for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    raise AssertionError("kvplan/knobs.py has no typed Knobs class")


def test_typed_knobs_are_the_generated_model_fields():
    typed = _typed_fields()
    assert [name for name, _ in typed] == list(knobs.Knobs.model_fields)
    namespace = {**vars(typing), **vars(knobs)}
    for name, annotation in typed:
        assert eval(annotation, namespace) == knobs.Knobs.model_fields[name].annotation, name


def test_given_is_the_dump_of_the_set_knobs():
    """Knobs.given reads plain values directly: the same dict, in field order, as dumping the
    model and dropping the unset ones; a speculative config (a model) comes out dumped."""
    plain = knobs.Knobs(max_model_len=32768, gpu_memory_utilization=0.9, kv_cache_dtype="auto",
                        enforce_eager=False).model_copy(update={"tensor_parallel_size": 4})
    spec = knobs.Knobs(max_model_len=4096, speculative_config={"method": "ngram",
                                                               "num_speculative_tokens": 3})
    for k in (plain, spec, knobs.Knobs()):
        dumped = {n: v for n, v in k.model_dump().items() if v is not None}
        assert k.given() == dumped
        assert list(k.given()) == list(dumped)
    assert plain.given() == {"tensor_parallel_size": 4, "max_model_len": 32768,
                             "gpu_memory_utilization": 0.9, "kv_cache_dtype": "auto",
                             "enforce_eager": False}
    assert isinstance(spec.given()["speculative_config"], dict)
