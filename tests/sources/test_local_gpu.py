"""--gpu local / kvplan gpus --local through a fake NVML (the real pynvml API, in-process), so
no GPU is needed; the real path is the same calls on a machine with a driver."""

from __future__ import annotations

import json
import sys
import types

import pytest
from clirun import run

from kvplan import plan
from kvplan.sources.catalog import resolve_gpu
from kvplan.units import GiB, MiB

H100_TOTAL = 81559 * MiB  # nvidia-smi memory.total of an H100 80GB HBM3 (reference/GPUS.md)
H100_RESERVED = 551 * MiB  # → CUDA total 81008 MiB = 79.11 GiB, as vLLM logs print it


class _Err(Exception):
    pass


def _fake_nvml(gpus: list[tuple[str, int, int, int, int]], *, fail_init: bool = False,
               v2: bool = True) -> types.ModuleType:
    """A pynvml stand-in: [(name, total, reserved, used, processes)] per GPU."""
    m = types.ModuleType("pynvml")
    m.NVMLError = _Err
    m.nvmlMemory_v2 = 0x02000028

    def init() -> None:
        if fail_init:
            raise _Err("Driver Not Loaded")

    def memory(h: int, version: int | None = None) -> types.SimpleNamespace:
        name, total, reserved, used, _ = gpus[h]
        if version and not v2:
            raise _Err("Function Not Found")
        info = types.SimpleNamespace(total=total, used=used, free=total - reserved - used)
        if version:
            info.reserved = reserved
        return info

    m.nvmlInit, m.nvmlShutdown = init, lambda: None
    m.nvmlDeviceGetCount = lambda: len(gpus)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: gpus[h][0]
    m.nvmlDeviceGetMemoryInfo = memory
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: [object()] * gpus[h][4]
    return m


@pytest.fixture
def nvml(monkeypatch):
    def install(*gpus, **kw):
        monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(list(gpus), **kw))
    return install


def test_local_gpu_is_the_catalogue_entry_with_nvmls_cuda_total(nvml):
    nvml(("NVIDIA H100 80GB HBM3", H100_TOTAL, H100_RESERVED, 0, 0))
    p = plan("meta-llama/Llama-3.1-8B-Instruct", "local")
    assert p.gpu.id == "h100-sxm-80gb"
    assert p.memory.total_bytes == H100_TOTAL - H100_RESERVED  # 79.11 GiB
    assert not any(x.code == "gpu-shared" for x in p.problems)
    assert p.performance is not None  # catalogue bandwidth/FLOPs carry over


def test_shared_gpu_plans_against_what_is_free(nvml):
    """Another process holds 40 GiB: vLLM's 0.92 × 79.11 GiB budget exceeds the ≈38.4 GiB free
    at init (free − 0.70 GiB context), so vLLM refuses to start; SGLang sizes its pool from the
    free memory it measures, so its pool shrinks by the 40 GiB."""
    nvml(("NVIDIA H100 80GB HBM3", H100_TOTAL, H100_RESERVED, 40 * GiB, 1))
    p = plan("meta-llama/Llama-3.1-8B-Instruct", "local")
    assert any(x.code == "gpu-shared" for x in p.problems)
    assert any(x.code == "startup-free-memory" for x in p.problems) and not p.fits
    assert p.recommendations.gpu_memory_utilization.value < 0.5
    alone = plan("meta-llama/Llama-3.1-8B-Instruct", "h100", engine="sglang")
    shared = plan("meta-llama/Llama-3.1-8B-Instruct", "local", engine="sglang")
    lost = (alone.kv_cache.tokens - shared.kv_cache.tokens) * alone.kv_cache.bytes_per_token
    f = alone.inputs["gpu_memory_utilization"].value
    assert abs(lost - f * 40 * GiB) < 2 * alone.kv_cache.bytes_per_token


def test_gpu_outside_the_catalogue_plans_memory_only(nvml):
    nvml(("NVIDIA Future GPU", 100 * GiB, 1 * GiB, 0, 0))
    p = plan("meta-llama/Llama-3.1-8B-Instruct", "local:0")
    assert p.gpu.id == "local-0" and p.memory.total_bytes == 99 * GiB
    assert p.performance is None and any(x.code == "no-performance-figures" for x in p.problems)


def test_v1_driver_keeps_the_catalogue_total(nvml):
    nvml(("NVIDIA H100 80GB HBM3", H100_TOTAL, H100_RESERVED, 0, 0), v2=False)
    p = plan("meta-llama/Llama-3.1-8B-Instruct", "local")
    assert p.gpu.id == "h100-sxm-80gb"
    assert p.memory.total_bytes == resolve_gpu("h100").cuda_total_bytes


def test_no_nvml_or_no_driver_exits_3(capsys, monkeypatch, nvml):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    code, out, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "local")
    assert code == 3 and "kvplan[nvml]" in err
    nvml(("x", 1, 0, 0, 0), fail_init=True)
    code, out, err = run(capsys, "gpus", "--local")
    assert code == 3 and "Driver Not Loaded" in err and "Traceback" not in err


def test_index_out_of_range_is_bad_input(capsys, nvml):
    nvml(("NVIDIA H100 80GB HBM3", H100_TOTAL, H100_RESERVED, 0, 0))
    code, out, err = run(capsys, "plan", "llama-3.1-8b", "--gpu", "local:3")
    assert code == 2 and "local:0" in err


def test_gpus_local_lists_usage(capsys, nvml):
    nvml(
        ("NVIDIA H100 80GB HBM3", H100_TOTAL, H100_RESERVED, 2 * GiB, 2),
        ("NVIDIA L4", 23034 * MiB, 500 * MiB, 0, 0),
    )
    code, out, err = run(capsys, "gpus", "--local", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["catalogue_id"] for r in rows] == ["h100-sxm-80gb", "l4"]
    assert rows[0]["used_bytes"] == 2 * GiB and rows[0]["processes"] == 2
