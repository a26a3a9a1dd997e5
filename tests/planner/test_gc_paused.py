"""planner.plan.gc_paused: the cyclic collector is off while a sweep plans, and what the sweep
made is not walked by the collector's first pass afterwards (it joins the oldest generation),
yet an unreachable cycle made meanwhile is still collected."""

import gc
import weakref

import pytest

from kvplan.planner.plan import gc_paused


@pytest.fixture(autouse=True)
def _collector_as_it_was():
    was = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if was else gc.disable)()


class _Node:
    def __init__(self) -> None:
        self.other: object = None


def test_the_objects_made_meanwhile_join_the_oldest_generation_unwalked():
    gc.enable()
    gc.collect()
    passes: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        with gc_paused():
            assert not gc.isenabled()
            kept = [[i] for i in range(20_000)]  # 20,000 tracked objects, all young
        young = gc.get_count()[0]
    finally:
        gc.callbacks.remove(seen)
    assert gc.isenabled()
    # re-enabled as it was, the collector's next pass would walk all 20,000 at once
    assert passes == []
    assert young < 100
    assert gc.get_freeze_count() == 0
    assert any(o is kept[0] for o in gc.get_objects(generation=2))


def test_an_unreachable_cycle_made_meanwhile_is_still_collected():
    gc.enable()
    with gc_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
    assert gone() is not None  # a cycle: reference counts alone never free it
    gc.collect()
    assert gone() is None


def test_objects_the_caller_froze_stay_frozen():
    """A frozen object sits in the permanent generation, which gc.get_objects() does not list
    (CPython gcmodule.c, gc_get_objects_impl walks generations 0-2); gc.unfreeze would move it
    back into the oldest one. The freeze count itself may fall meanwhile: a frozen object whose
    references drop is freed as any other (that made an exact-count check flaky)."""
    sentinel: list[int] = [2026]
    gc.enable()
    gc.freeze()
    assert gc.get_freeze_count() > 0
    assert not any(o is sentinel for o in gc.get_objects())
    with gc_paused():
        _ = [[i] for i in range(1000)]
    assert not any(o is sentinel for o in gc.get_objects())
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off():
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()
