"""How fast `kvplan plan` answers for a catalogue model (whole process, cold interpreter).

    python benchmarks/cli_speed.py [runs]

Prints the median and worst wall time of `python -m kvplan plan … --json` over N runs.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

CMD = [sys.executable, "-m", "kvplan", "plan", "meta-llama/Llama-3.1-8B-Instruct",
       "--gpu", "h100-sxm-80gb", "--json"]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(CMD, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    print(f"kvplan plan (catalogue model, --json): median {statistics.median(times) * 1000:.0f} ms, "
          f"worst {max(times) * 1000:.0f} ms over {runs} runs")


if __name__ == "__main__":
    main()
