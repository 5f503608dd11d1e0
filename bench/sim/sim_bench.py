#!/usr/bin/python3
"""gangsched-sim's benchmark (bench/RESULTS.md, "gangsched-sim"): a cluster
of NODES x 8 GPUs in four equal queues, a synthetic trace from
sim/tools/gangsched_sim_tracegen.py (a published profile, a load, a number
of days), and one timed gangsched-sim run over it, pinned to one core.

    bench/sim/sim_bench.py --profile helios --days 30 --load 0.1
    bench/sim/sim_bench.py --nodes 65000 --days 0.93 --load 0.1

Prints the trace's size, the run's wall time, cycles, time per cycle, peak
memory and the comparison row (utilization, waits). A run that goes past
--timeout is reported as such, with the cycles it did not get to count.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GANGSCHED_BUILD_DIR", ROOT / "build"))
SIM = os.environ.get("GANGSCHED_SIM", str(BUILD / "sim" / "gangsched-sim"))
TRACEGEN = ROOT / "sim" / "tools" / "gangsched_sim_tracegen.py"


def config_text(nodes: int) -> str:
    quota = nodes * 8 // 4
    lines = ["queues:"]
    for team in ("team-a", "team-b", "team-c", "team-d"):
        lines += [f"  - name: {team}",
                  "    resources:",
                  f"      nvidia.com/gpu: {{quota: {quota}, limit: -1, "
                  "over_quota_weight: 1}"]
    lines.append("nodes:")
    for i in range(nodes):
        lines.append(f'  - {{name: node-{i:05d}, allocatable: '
                     f'{{nvidia.com/gpu: "8", cpu: "128", memory: 1Ti}}}}')
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--profile", default="helios")
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--load", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpu", default="1", help="taskset -c (default 1)")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sim-bench-") as tmp:
        config = Path(tmp) / "cluster.yaml"
        config.write_text(config_text(args.nodes))
        trace = Path(tmp) / "trace.jsonl"
        subprocess.run(
            [sys.executable, str(TRACEGEN), f"--config={config}",
             f"--profile={args.profile}", f"--days={args.days}",
             f"--load={args.load}", f"--seed={args.seed}",
             f"--out={trace}"], check=True)
        with open(trace) as f:
            workloads = sum(1 for _ in f)
        out = Path(tmp) / "out"
        out.mkdir()
        stderr = Path(tmp) / "stderr"
        start = time.monotonic()
        with open(stderr, "w") as err:
            # taskset execs the simulator: its rusage is the simulator's
            # alone (not the generator's, as RUSAGE_CHILDREN would mix in).
            proc = subprocess.Popen(
                ["taskset", "-c", args.cpu, SIM, f"--trace={trace}",
                 f"--config={config}", f"--out={out}"],
                stdout=subprocess.DEVNULL, stderr=err)
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid != 0:
                    break
                if time.monotonic() - start > args.timeout:
                    proc.kill()
                    proc.wait()
                    print(f"{workloads} workloads, {args.nodes} nodes: not "
                          f"done in {args.timeout:.0f} s")
                    return 1
                time.sleep(0.05)
        wall = time.monotonic() - start
        if os.waitstatus_to_exitcode(status) != 0:
            print(stderr.read_text(), file=sys.stderr)
            return 1
        # "gangsched-sim: cluster: N workloads, N ended, last at T s, C cycles"
        cycles = int(stderr.read_text().strip().split()[-2])
        peak = usage.ru_maxrss
        with open(out / "comparison.csv") as f:
            row = next(csv.DictReader(f))
        print(f"{workloads} workloads ({args.profile}, {args.days} days, "
              f"load {args.load}) on {args.nodes} x 8 GPUs: {wall:.1f} s, "
              f"{cycles} cycles, {wall / max(cycles, 1) * 1e6:.0f} us per "
              f"cycle, {peak // 1024} MiB peak")
        print(f"  utilization {row['gpu_utilization']}, waits p50 "
              f"{row['wait_p50']} s p95 {row['wait_p95']} s max "
              f"{row['wait_max']} s, evictions {row['evictions']}, "
              f"simulated {row['end']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
