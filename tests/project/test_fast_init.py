"""units.fast_init: the frozen dataclasses the planning loops build keep dataclass semantics."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import FrozenInstanceError, InitVar, dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvplan
from kvplan.engines.base import MemoryResult
from kvplan.engines.vllm import StageMemory
from kvplan.knobs import Layout
from kvplan.model.weights import WeightMemory
from kvplan.perf.step import Links, PerfContext, PerfPoint, StepTerms
from kvplan.planner.nodes import Placement
from kvplan.planner.performance import Lengths
from kvplan.planner.plan import _Fraction, _Setup
from kvplan.units import fast_init

FAST = [MemoryResult, StageMemory, Layout, WeightMemory, Links, PerfContext, PerfPoint,
        StepTerms, Placement, Lengths, _Setup, _Fraction]


@dataclass(frozen=True)
class _Plain:
    a: int
    b: list[int] = field(default_factory=list)
    c: str = "x"
    d: int = field(default=7, init=False)


@fast_init
@dataclass(frozen=True)
class _Fast(_Plain):  # the same fields, the fast __init__
    pass


@given(a=st.integers(), b=st.none() | st.lists(st.integers(), max_size=3),
       c=st.none() | st.text(max_size=3))
def test_same_fields_defaults_and_factories_as_the_generated_init(a, b, c):
    kwargs = {k: v for k, v in (("b", b), ("c", c)) if v is not None}
    plain, fast = _Plain(a, **kwargs), _Fast(a, **kwargs)
    assert dataclasses.asdict(plain) == dataclasses.asdict(fast)
    assert fast == _Fast(a, **kwargs) and repr(fast) == repr(plain).replace("_Plain", "_Fast")
    assert dataclasses.replace(fast, a=a + 1).a == a + 1
    assert pickle.loads(pickle.dumps(fast)) == fast


def test_default_factories_are_called_per_instance_and_assignment_still_raises():
    one, two = _Fast(1), _Fast(1)
    assert one.b == [] and one.b is not two.b
    with pytest.raises(FrozenInstanceError):
        one.a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        _Fast()  # type: ignore[call-arg]  # a required field stays required
    with pytest.raises(TypeError):
        _Fast(1, d=3)  # type: ignore[call-arg]  # init=False stays out of the signature


def test_refuses_what_it_does_not_reproduce():
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        scale: InitVar[int] = 1

    @dataclass(frozen=True, kw_only=True)
    class KwOnly:
        a: int

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    for cls in (Mutable, WithInitVar, KwOnly, Slotted):
        with pytest.raises(TypeError, match="not a plain frozen dataclass"):
            fast_init(cls)


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__name__)
def test_the_planning_types_use_it_and_keep_their_signature(cls):
    """Each class the planner builds per plan has the fast __init__, with the dataclass's
    parameters in order."""
    init = vars(cls)["__init__"]
    assert init.__code__.co_filename == "<string>" and "_set" in init.__code__.co_names
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    assert list(init.__code__.co_varnames[1:1 + len(names)]) == names


def test_the_list_above_is_every_use() -> None:
    """Every `@fast_init` in the package is in FAST (so each is checked above)."""
    root = Path(kvplan.__file__).parent
    uses = sum(p.read_text(encoding="utf-8").count("\n@fast_init\n") for p in root.rglob("*.py"))
    assert uses == len(FAST)
