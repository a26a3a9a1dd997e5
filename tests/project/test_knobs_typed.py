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
