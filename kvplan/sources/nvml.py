"""The GPUs in front of you, read through NVML (`nvidia-ml-py`, the optional `nvml` extra).
I/O layer: only `kvplan plan --gpu local` and `kvplan gpus --local` import it.

NVML's v2 memory query gives total, reserved, used and free (nvml.h nvmlMemory_v2_t); the
CUDA total an engine sees is total − reserved (reference/GPUS.md, measured on an H200:
143771 − 615.06 = 143155.94 MiB). Older drivers answer only v1 (no reserved figure): the CUDA
total is then left to the catalogue entry, or estimated.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Reason, UnavailableError


@dataclass(frozen=True)
class LocalGpu:
    index: int
    name: str  # as nvidia-smi prints it
    total_bytes: int  # NVML total (nvidia-smi memory.total)
    reserved_bytes: int | None  # driver reservation (NVML v2); None on v1-only drivers
    used_bytes: int  # in use now, by every process
    free_bytes: int
    processes: int  # compute processes holding memory on it

    @property
    def cuda_total_bytes(self) -> int | None:
        """cudaMemGetInfo's total = NVML total − reserved (None when unknown)."""
        return None if self.reserved_bytes is None else self.total_bytes - self.reserved_bytes


def local_gpus() -> list[LocalGpu]:
    """Every GPU NVML sees. UnavailableError (exit 3) without the bindings, a driver or a GPU."""
    try:
        # nvidia-ml-py (the optional nvml extra) ships no stubs, and may be absent
        import pynvml  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        raise UnavailableError("reading the local GPU needs the NVML bindings",
                               reason=Reason.NO_LOCAL_GPU,
                               hint="pip install 'kvplan[nvml]' (nvidia-ml-py), or pass --gpu with "
                               "a catalogue id (`kvplan gpus`)") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        raise UnavailableError(f"NVML cannot be read here ({e})", reason=Reason.NO_LOCAL_GPU,
                               hint="no NVIDIA driver or GPU on this machine; pass --gpu with a "
                               "catalogue id (`kvplan gpus`)") from None
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else str(name)
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                reserved = int(mem.reserved)
            except (pynvml.NVMLError, AttributeError, TypeError):
                mem, reserved = pynvml.nvmlDeviceGetMemoryInfo(h), None
            try:
                procs = len(pynvml.nvmlDeviceGetComputeRunningProcesses(h))
            except pynvml.NVMLError:
                procs = 0
            out.append(LocalGpu(i, name, int(mem.total), reserved, int(mem.used), int(mem.free),
                                procs))
    except pynvml.NVMLError as e:
        raise UnavailableError(f"NVML query failed ({e})", reason=Reason.NO_LOCAL_GPU) from None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
    if not out:
        raise UnavailableError("NVML sees no GPU on this machine", reason=Reason.NO_LOCAL_GPU,
                               hint="pass --gpu with a catalogue id (`kvplan gpus`)")
    return out
