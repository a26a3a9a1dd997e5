"""How fast `kvplan plan` answers for a catalogue model (whole process, cold interpreter).

    python benchmarks/cli_speed.py [runs]

Prints the median and worst wall time of `python -m kvplan plan … --json` over N runs, the CPU
time (user + system) of the same runs, and both for a bare `python -c pass` and for importing
typer + pydantic + rich (the floor kvplan's own dependencies set), so the ratio can be read on a
shared machine where wall time alone varies with the load.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CMD = [sys.executable, "-m", "kvplan", "plan", "meta-llama/Llama-3.1-8B-Instruct",
       "--gpu", "h100-sxm-80gb", "--json"]
BARE = [sys.executable, "-c", "pass"]
FLOOR = [sys.executable, "-c", "import typer, pydantic, rich.console"]


def measure(cmd: list[str], runs: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) per run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's kvplan
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=ROOT)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    ms = {}
    for name, cmd in (("kvplan plan (catalogue model, --json)", CMD), ("bare python -c pass", BARE),
                      ("import typer, pydantic, rich", FLOOR)):
        walls, cpus = measure(cmd, runs)
        ms[name] = (statistics.median(walls), statistics.median(cpus))
        print(f"{name}: median {ms[name][0] * 1000:.0f} ms wall (worst {max(walls) * 1000:.0f}), "
              f"{ms[name][1] * 1000:.0f} ms CPU over {runs} runs")
    plan, bare, floor = ms[CMD_NAME], ms["bare python -c pass"], ms["import typer, pydantic, rich"]
    print(f"kvplan plan / bare python: {plan[0] / bare[0]:.1f}× wall, "
          f"{plan[1] / bare[1]:.1f}× CPU; typer+pydantic+rich floor: "
          f"{floor[0] / bare[0]:.1f}× wall, {floor[1] / bare[1]:.1f}× CPU")


CMD_NAME = "kvplan plan (catalogue model, --json)"

if __name__ == "__main__":
    main()
