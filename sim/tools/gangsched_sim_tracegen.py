#!/usr/bin/python3
"""Synthetic traces for gangsched-sim with the shape published for large
GPU clusters: mostly 1-GPU jobs, a heavy tail of multi-node gangs, heavy-
tailed run times, and arrivals that follow the time of day
(docs/SIMULATOR.md, "Synthetic traces", which cites every figure used).

  sim/tools/gangsched_sim_tracegen.py --config=sim/examples/even-split.yaml \\
      --profile=helios --days=30 --load=0.8 --seed=1 > trace.jsonl

The same arguments give the same bytes on any Python 3: the only source of
randomness is random.Random(seed).random(), and every draw is made from it
here.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import random
import sys
from dataclasses import dataclass
from typing import IO

import yaml


@dataclass(frozen=True)
class Profile:
    """Published figures of one trace's GPU jobs (median and mean run time
    in seconds, longest run, median / mean / largest GPUs per job)."""
    name: str
    median_run: float
    mean_run: float
    max_run: float
    mean_gpus: float
    max_gpus: int


# The summary table published with the Acme trace (Hu et al., NSDI 2024;
# repository InternLM/AcmeTrace, data/cluster_summary.csv), which lists the
# earlier traces too: Philly (Jeon et al., USENIX ATC 2019), Helios (Hu et
# al., SC 2021). Every one has a median of 1 GPU per job.
PROFILES = {
    "philly": Profile("philly", 874.0, 18006.055, 4240676.0, 1.928, 128),
    "helios": Profile("helios", 206.0, 6651.681, 4320009.0, 3.716, 2048),
    "seren": Profile("seren", 122.0, 1414.335, 1209604.0, 5.68, 1024),
    "kalos": Profile("kalos", 124.0, 1259.689, 625740.0, 26.77, 1024),
}

DAY = 86400.0


class Draws:
    """Every random number of a trace, from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def uniform(self) -> float:
        return self.rng.random()

    def open_uniform(self) -> float:
        u = self.rng.random()
        return u if u > 0.0 else 1e-300

    def normal(self) -> float:
        # Box-Muller with our own draws: the same numbers on any Python.
        u1, u2 = self.open_uniform(), self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)

    def exponential(self, rate: float) -> float:
        return -math.log(self.open_uniform()) / rate

    def pick(self, cumulative: list[float]) -> int:
        return bisect.bisect_right(cumulative, self.uniform() * cumulative[-1])


def runtime_sampler(p: Profile) -> tuple[float, float]:
    """(mu, sigma) of the lognormal with the profile's median and mean:
    median = e^mu, mean = e^(mu + sigma^2 / 2)."""
    sigma = math.sqrt(2.0 * math.log(p.mean_run / p.median_run))
    return math.log(p.median_run), sigma


def gpu_sizes(p: Profile, single_share: float, cap: int) -> tuple[list[int],
                                                                list[float]]:
    """GPUs per job: 1 with probability `single_share` (the published median
    is 1, so at least half), else 2, 4, ... up to the largest that fits,
    with weights r^k chosen so that the mean is the published mean (as
    near as the cap allows). Returns sizes and cumulative weights."""
    largest = max(1, min(p.max_gpus, cap))
    sizes = [1]
    while sizes[-1] * 2 <= largest:
        sizes.append(sizes[-1] * 2)
    tail = sizes[1:]

    def mean_for(r: float) -> float:
        if not tail:
            return 1.0
        weights = [r ** k for k in range(len(tail))]
        total = sum(weights)
        return single_share + (1 - single_share) * sum(
            s * w for s, w in zip(tail, weights)) / total

    lo, hi = 1e-6, 1.0
    if mean_for(hi) >= p.mean_gpus:
        while hi - lo > 1e-9:  # mean_for rises with r
            mid = (lo + hi) / 2
            if mean_for(mid) < p.mean_gpus:
                lo = mid
            else:
                hi = mid
    r = hi
    probs = [single_share] + [
        (1 - single_share) * r ** k / sum(r ** j for j in range(len(tail)))
        for k in range(len(tail))]
    cumulative, acc = [], 0.0
    for x in probs:
        acc += x
        cumulative.append(acc)
    return sizes, cumulative


def leaf_queues(config: dict) -> list[str]:
    queues = config.get("queues") or []
    parents = {q.get("parent") for q in queues if q.get("parent")}
    return [q["name"] for q in queues if q["name"] not in parents]


def cluster_gpus(config: dict) -> tuple[float, int]:
    """(total GPUs, GPUs of the largest node) of the config's nodes."""
    total, largest = 0.0, 0
    for node in config.get("nodes") or []:
        gpus = float((node.get("allocatable") or {}).get("nvidia.com/gpu", 0))
        total += gpus
        largest = max(largest, int(gpus))
    return total, largest


def generate(config: dict, profile: Profile, days: float, load: float,
             seed: int, single_share: float, elastic_share: float,
             peak_ratio: float, out: IO[str],
             checkpoint_seconds: float = 0.0) -> int:
    queues = leaf_queues(config)
    if not queues:
        raise ValueError("the config has no queues")
    total, node_gpus = cluster_gpus(config)
    if total <= 0 or node_gpus <= 0:
        raise ValueError("the config's nodes have no nvidia.com/gpu")
    draws = Draws(seed)
    mu, sigma = runtime_sampler(profile)
    sizes, size_cum = gpu_sizes(profile, single_share, int(total))
    # Mean GPU-seconds of a job, as drawn (the run time is truncated at the
    # profile's longest and at the trace's length): a fixed number of
    # draws from a generator of its own, so the trace's draws do not move.
    probe = Draws(seed ^ 0x5EED)
    span = days * DAY
    work = 0.0
    n = 20000
    for _ in range(n):
        run = min(math.exp(mu + sigma * probe.normal()), profile.max_run,
                  span)
        work += sizes[probe.pick(size_cum)] * run
    rate = load * total / (work / n)  # jobs a second, on average
    # Arrivals: Poisson, thinned by the time of day (peak at 14:00, trough
    # at 02:00, peak / trough = peak_ratio), averaging `rate`.
    a = (peak_ratio - 1) / (peak_ratio + 1)
    peak = rate * (1 + a)
    t, count = 0.0, 0
    weights = [1.0 / (i + 1) for i in range(len(queues))]  # a few big teams
    queue_cum, acc = [], 0.0
    for w in weights:
        acc += w
        queue_cum.append(acc)
    while True:
        t += draws.exponential(peak)
        if t >= span:
            break
        hour = (t % DAY) / 3600.0
        if draws.uniform() > (1 + a * math.cos(2 * math.pi * (hour - 14) /
                                               24)) / (1 + a):
            continue
        gpus = sizes[draws.pick(size_cum)]
        run = min(math.exp(mu + sigma * draws.normal()), profile.max_run)
        queue = queues[draws.pick(queue_cum)]
        elastic = draws.uniform() < elastic_share
        per_pod = min(gpus, node_gpus)
        pods = max(1, gpus // per_pod)
        group = {"name": "worker", "desired_count": pods,
                 "resources": {"nvidia.com/gpu": per_pod, "cpu": 4 * per_pod,
                               "memory": f"{32 * per_pod}Gi"}}
        if elastic and pods > 1:
            group["min_count"] = max(1, pods // 2)
        line = {"id": f"{profile.name}-{count:07d}",
                "arrival": round(t, 3), "runtime": max(1, round(run)),
                "queue": queue, "groups": [group]}
        if checkpoint_seconds > 0:
            line["checkpoint_seconds"] = checkpoint_seconds
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Writes a synthetic gangsched-sim trace (JSON Lines) "
                    "to standard output.")
    ap.add_argument("--config", required=True,
                    help="the server config the trace is for: its leaf "
                         "queues get the jobs, its nodes' GPUs set the load")
    ap.add_argument("--profile", choices=sorted(PROFILES), default="helios",
                    help="whose published figures to follow (default "
                         "helios)")
    ap.add_argument("--days", type=float, default=7.0,
                    help="arrivals over this many days (default 7)")
    ap.add_argument("--load", type=float, default=0.8,
                    help="GPU time asked for, as a share of the cluster's "
                         "(default 0.8; above 1 the queues grow)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--single-gpu-share", type=float, default=0.6,
                    help="share of 1-GPU jobs (default 0.6: the published "
                         "median is 1 GPU, the share itself is not "
                         "published)")
    ap.add_argument("--elastic-share", type=float, default=0.2,
                    help="share of multi-pod jobs that may run on half "
                         "their pods (default 0.2)")
    ap.add_argument("--peak-ratio", type=float, default=2.0,
                    help="arrivals at 14:00 over arrivals at 02:00 "
                         "(default 2; an assumption, not a published "
                         "figure)")
    ap.add_argument("--checkpoint-seconds", type=float, default=0.0,
                    help="every job checkpoints and exits this long after "
                         "a preemption notice (docs/SIMULATOR.md, "
                         "\"Preemption notice\"; default 0: none)")
    ap.add_argument("--out", default="-", help="file (default: stdout)")
    args = ap.parse_args(argv)
    for name, value, lo, hi in (
            ("--days", args.days, 0.0, 36500.0),
            ("--load", args.load, 0.0, 100.0),
            ("--single-gpu-share", args.single_gpu_share, 0.5, 1.0),
            ("--elastic-share", args.elastic_share, 0.0, 1.0),
            ("--peak-ratio", args.peak_ratio, 1.0, 100.0),
            ("--checkpoint-seconds", args.checkpoint_seconds, 0.0, 86400.0)):
        if not lo <= value <= hi or (name in ("--days", "--load")
                                     and value == 0):
            ap.error(f"{name} must be from {lo} to {hi}"
                     + (" and not 0" if name in ("--days", "--load") else ""))
    try:
        with open(args.config) as f:
            config = yaml.safe_load(f) or {}
        out = sys.stdout if args.out == "-" else open(args.out, "w")
        try:
            n = generate(config, PROFILES[args.profile], args.days, args.load,
                         args.seed, args.single_gpu_share, args.elastic_share,
                         args.peak_ratio, out, args.checkpoint_seconds)
        finally:
            if out is not sys.stdout:
                out.close()
    except (OSError, ValueError, yaml.YAMLError) as e:
        print(f"gangsched_sim_tracegen: {e}", file=sys.stderr)
        return 2
    print(f"gangsched_sim_tracegen: {n} workloads", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
