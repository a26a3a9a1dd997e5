"""--prices files: what a YAML value that is not one price says, and the sweep note when a
file prices some GPUs and the bundled defaults the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.errors import InvalidConfigError
from kvplan.sources.catalog import resolve_gpu
from kvplan.sources.prices import load_price_file
from kvplan.specs import Workload


@pytest.mark.parametrize(("text", "want"), [
    ("h100: [1, 2]\n", "US$ per GPU-hour of h100-sxm-80gb: one number, not a list"),
    ("h100: {usd_per_hour: {a: 1}}\n", "one number, not a mapping"),
    ("h100: {price: 2}\n", "h100-sxm-80gb: no usd_per_hour in its mapping"),
    ("h100:\n", "no US$ per GPU-hour for h100-sxm-80gb"),
    ("h100: abc\n", "US$ per GPU-hour 'abc': must be a finite number"),
])
def test_a_yaml_value_that_is_not_one_price_says_what_it_is(tmp_path: Path, text: str,
                                                            want: str) -> None:
    """`h100: [1, 2]` said "US$ per GPU-hour None: must be a finite number": None was never
    in the file."""
    p = tmp_path / "prices.yaml"
    p.write_text(text)
    with pytest.raises(InvalidConfigError) as e:
        load_price_file(p, resolve_gpu)
    assert want in e.value.message and "None" not in e.value.message, e.value.message


def test_a_partial_price_file_names_the_gpus_left_on_the_defaults() -> None:
    """A file pricing h100 only still said "prices are kvplan's bundled defaults … pass
    --prices FILE for your own", as if the file had been ignored."""
    def note(r: object) -> list[str]:
        return [n for n in r.notes if "bundled defaults" in n]  # type: ignore[attr-defined]

    r = kvplan.sweep("meta-llama/Llama-3.1-8B-Instruct", gpus=["h100", "b200", "mi300x"],
                     max_gpus=1, max_model_len=4096, workload=Workload(target_concurrency=8),
                     prices={"h100": 2.0}, offline=True)
    (text,) = note(r)
    assert text.startswith("your prices do not cover b200, mi300x: their prices are kvplan's "
                           "bundled defaults"), text
    assert "gpu_specs/prices.csv" in text and "pass --prices FILE" not in text
    one = kvplan.sweep("meta-llama/Llama-3.1-8B-Instruct", gpus=["h100", "b200"], max_gpus=1,
                       max_model_len=4096, workload=Workload(target_concurrency=8),
                       prices={"h100": 2.0}, offline=True)
    assert note(one)[0].startswith("your prices do not cover b200: its price is")
