"""How fast `kvplan plan` answers for a catalogue model (whole process, cold interpreter).

    python benchmarks/cli_speed.py [runs] [--no-compile]

Paired runs: each round starts `python -m kvplan plan … --json`, a bare `python -c pass` and
the floor kvplan's own dependencies set: an interpreter that imports typer and defines, builds
and serializes one pydantic model (`import pydantic` alone defers most of pydantic's own imports
to the first model class, so it understates what any pydantic-typed CLI pays), in an order
that alternates from round to round, so a load spike on a shared machine hits all of them. The
ratios are taken per round (kvplan / bare of the same round); the report gives their median, with
the median wall and CPU (user + system) times.

By default the checkout is byte-compiled first (`compileall`, into the ignored __pycache__
folders), as an installed wheel is, and the runs may read that bytecode even when
PYTHONDONTWRITEBYTECODE is set; `--no-compile` measures whatever is there (with no bytecode,
every start compiles kvplan's sources, about 0.1 s more).
"""

from __future__ import annotations

import compileall
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
FLOOR = [sys.executable, "-c", "import typer\nfrom pydantic import BaseModel\n"
         "class A(BaseModel):\n    x: int\nA(x=1).model_dump_json()"]
FLOOR_NAME = "typer + one pydantic model"
CMD_NAME = "kvplan plan (catalogue model, --json)"
NAMES = {CMD_NAME: CMD, "bare python -c pass": BARE, FLOOR_NAME: FLOOR}


def run_once(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of `cmd` with this checkout's kvplan."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def measure(cmd: list[str], runs: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) per run of one command (unpaired; sweep_speed.py uses it)."""
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = run_once(cmd)
        walls.append(wall)
        cpus.append(cpu)
    return walls, cpus


def paired(runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """Per command: (wall seconds, CPU seconds) per round, the rounds interleaved."""
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in NAMES}
    order = list(NAMES)
    for i in range(runs):
        for name in order if i % 2 == 0 else order[::-1]:
            wall, cpu = run_once(NAMES[name])
            times[name][0].append(wall)
            times[name][1].append(cpu)
    return times


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(args[0]) if args else 10
    if "--no-compile" not in sys.argv:
        compileall.compile_dir(ROOT / "kvplan", quiet=1)
    run_once(CMD)  # warm the file cache
    times = paired(runs)
    for name, (walls, cpus) in times.items():
        print(f"{name}: median {statistics.median(walls) * 1000:.0f} ms wall (worst "
              f"{max(walls) * 1000:.0f}), {statistics.median(cpus) * 1000:.0f} ms CPU over {runs} "
              "paired runs")
    bare = times["bare python -c pass"]

    def ratio(name: str, k: int) -> float:
        return statistics.median(a / b for a, b in zip(times[name][k], bare[k], strict=True))

    print(f"kvplan plan / bare python (median of per-round ratios): {ratio(CMD_NAME, 0):.1f}× "
          f"wall, {ratio(CMD_NAME, 1):.1f}× CPU; floor ({FLOOR_NAME}): "
          f"{ratio(FLOOR_NAME, 0):.1f}× wall, {ratio(FLOOR_NAME, 1):.1f}× CPU")


if __name__ == "__main__":
    main()
