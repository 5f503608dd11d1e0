"""The synthetic trace generator (sim/tools/gangsched_sim_tracegen.py):
the same seed gives the same bytes, the samples follow the published
figures it cites (docs/SIMULATOR.md, "Synthetic traces"), and every trace
it writes is one gangsched-sim takes."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "sim" / "tools" / "gangsched_sim_tracegen.py"
SIM = os.environ.get("GANGSCHED_SIM", str(ROOT / "build/sim/gangsched-sim"))
sys.path.insert(0, str(GEN.parent))

import gangsched_sim_tracegen as tracegen  # noqa: E402


def cluster(tmp_path: Path, nodes: int) -> Path:
    config = tmp_path / f"c{nodes}.yaml"
    lines = ["queues:", "  - name: a", "  - name: b", "  - name: c",
             "nodes:"]
    lines += [f'  - {{name: n{i}, allocatable: {{nvidia.com/gpu: "8", '
              f'cpu: "96", memory: 768Gi}}}}' for i in range(nodes)]
    config.write_text("\n".join(lines) + "\n")
    return config


def generate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GEN), *args],
                          capture_output=True, text=True, timeout=120)


def lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines()]


def test_the_same_seed_gives_the_same_bytes(tmp_path):
    config = cluster(tmp_path, 4)
    a = generate(f"--config={config}", "--days=3", "--seed=5")
    b = generate(f"--config={config}", "--days=3", "--seed=5")
    c = generate(f"--config={config}", "--days=3", "--seed=6")
    assert a.returncode == 0, a.stderr
    assert a.stdout and a.stdout == b.stdout
    assert a.stdout != c.stdout


@pytest.mark.parametrize("name", sorted(tracegen.PROFILES))
def test_samples_follow_the_published_figures(tmp_path, name):
    profile = tracegen.PROFILES[name]
    config = cluster(tmp_path, 2000)
    done = generate(f"--config={config}", f"--profile={name}", "--days=1",
                    "--load=0.5", "--seed=1", "--peak-ratio=1")
    assert done.returncode == 0, done.stderr
    jobs = lines(done.stdout)
    assert len(jobs) > 5000
    gpus = [j["groups"][0]["desired_count"] *
            j["groups"][0]["resources"]["nvidia.com/gpu"] for j in jobs]
    runs = [j["runtime"] for j in jobs]
    assert statistics.median(gpus) == 1
    assert abs(statistics.mean(gpus) - profile.mean_gpus) \
        < 0.25 * profile.mean_gpus
    assert max(gpus) <= profile.max_gpus
    assert abs(statistics.median(runs) - profile.median_run) \
        < 0.15 * profile.median_run
    assert max(runs) <= profile.max_run + 1
    # Heavy-tailed: the mean is several times the median.
    assert statistics.mean(runs) > 4 * statistics.median(runs)
    # Multi-node gangs are whole nodes.
    for j in jobs:
        g = j["groups"][0]
        if g["desired_count"] > 1:
            assert g["resources"]["nvidia.com/gpu"] == 8


def test_the_load_sets_the_arrival_rate(tmp_path):
    config = cluster(tmp_path, 100)
    counts = []
    for load in ("0.4", "0.8"):
        done = generate(f"--config={config}", "--days=2", f"--load={load}",
                        "--seed=3")
        assert done.returncode == 0, done.stderr
        counts.append(len(done.stdout.splitlines()))
    assert 1.6 < counts[1] / counts[0] < 2.4


def test_arrivals_follow_the_time_of_day(tmp_path):
    config = cluster(tmp_path, 500)
    done = generate(f"--config={config}", "--days=2", "--seed=2",
                    "--peak-ratio=3")
    hours = [int(j["arrival"] % 86400 // 3600) for j in lines(done.stdout)]
    afternoon = sum(1 for h in hours if 12 <= h < 16)
    night = sum(1 for h in hours if 0 <= h < 4)
    assert afternoon > 2 * night


def test_gangsched_sim_takes_every_trace_it_writes(tmp_path):
    config = cluster(tmp_path, 8)
    trace = tmp_path / "t.jsonl"
    done = generate(f"--config={config}", "--days=1", "--seed=9",
                    "--profile=kalos", f"--out={trace}")
    assert done.returncode == 0, done.stderr
    sim = subprocess.run([SIM, f"--trace={trace}", f"--config={config}",
                          f"--out={tmp_path / 'out'}"],
                         capture_output=True, text=True, timeout=120)
    assert sim.returncode == 0, sim.stderr
    rows = (tmp_path / "out" / "workloads.csv").read_text().splitlines()
    assert len(rows) == 1 + len(trace.read_text().splitlines())


def test_a_notice_with_checkpoints_saves_the_work_a_reclaim_throws_away(
        tmp_path):
    """docs/SIMULATOR.md, "What a notice buys": the same whole-gang trace
    (every job checkpoints in 2 minutes) on two teams, without a notice and
    with a 5-minute one on the team that is reclaimed from."""
    config = tmp_path / "teams.yaml"
    config.write_text(
        "queues:\n"
        "  - {name: a, resources: {nvidia.com/gpu: {quota: 16}}}\n"
        "  - {name: b, resources: {nvidia.com/gpu: {quota: 16}}}\n"
        "nodes:\n" + "".join(
            f'  - {{name: n{i}, allocatable: {{nvidia.com/gpu: "8", '
            f'cpu: "96", memory: 768Gi}}}}\n' for i in range(4)))
    told = tmp_path / "told.yaml"
    told.write_text(config.read_text().replace(
        "name: a,", "name: a, preemption_notice: 5m,").replace(
        "name: b,", "name: b, preemption_notice: 5m,"))
    trace = tmp_path / "t.jsonl"
    done = generate(f"--config={config}", "--days=2", "--seed=7",
                    "--load=0.9", "--elastic-share=0",
                    "--checkpoint-seconds=120", f"--out={trace}")
    assert done.returncode == 0, done.stderr
    assert all(x["checkpoint_seconds"] == 120
               for x in lines(trace.read_text()))
    sim = subprocess.run([SIM, f"--trace={trace}", f"--config={config}",
                          f"--config={told}", f"--out={tmp_path / 'out'}"],
                         capture_output=True, text=True, timeout=120)
    assert sim.returncode == 0, sim.stderr
    rows = (tmp_path / "out" / "comparison.csv").read_text().splitlines()
    header = rows[0].split(",")
    runs = {r.split(",")[0]: dict(zip(header, r.split(","))) for r in rows[1:]}
    bare, noticed = runs["teams"], runs["told"]
    assert float(bare["lost_gpu_hours"]) > 0
    assert float(bare["saved_gpu_hours"]) == 0
    assert float(noticed["saved_gpu_hours"]) > 0
    assert float(noticed["lost_gpu_hours"]) < float(bare["lost_gpu_hours"])


def test_bad_arguments_are_refused(tmp_path):
    config = cluster(tmp_path, 1)
    assert generate(f"--config={config}", "--load=0").returncode == 2
    assert generate(f"--config={config}",
                    "--single-gpu-share=0.2").returncode == 2
    assert generate(f"--config={config}",
                    "--checkpoint-seconds=-1").returncode == 2
    empty = tmp_path / "empty.yaml"
    empty.write_text("queues:\n  - name: a\n")
    done = generate(f"--config={empty}")
    assert done.returncode == 2
    assert "no nvidia.com/gpu" in done.stderr
