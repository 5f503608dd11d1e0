"""gangsched-sim decides as the real server does (docs/SIMULATOR.md,
"Checked against the server").

The example trace is replayed twice per config: by gangsched-sim, and over
gRPC against the gangsched binary started with --test-clock, by a driver
written here from the model in docs/SIMULATOR.md alone. The driver moves
the server's clock one tick at a time, sends what falls due (completions,
eviction confirmations, arrivals, in that order), asks for one cycle, and
reads every workload back. Each workload's start, end, evictions and lost
GPU time must be the same in both, to the millisecond.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GANGSCHED_BUILD_DIR", ROOT / "build"))
SERVER = os.environ.get("GANGSCHED_SERVER", str(BUILD / "server/gangsched"))
SIM = os.environ.get("GANGSCHED_SIM", str(BUILD / "sim/gangsched-sim"))
EXAMPLES = ROOT / "sim" / "examples"
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "clients" / "python"),
                str(BUILD / "clients" / "python")]

import gangsched  # noqa: E402
from gangsched import _stubs  # noqa: E402
from gangsched.quantity import parse_quantity  # noqa: E402
from server_process import free_port, wait_until  # noqa: E402

EPOCH = 1700000000  # the sim's virtual time zero, as a Unix time
TICK_MS = 10_000
DELAY_MS = 30_000  # gangsched-sim's --eviction-delay default
GPU = "nvidia.com/gpu"


def grid(ms: int) -> int:
    return -(-ms // TICK_MS) * TICK_MS


@dataclass
class Job:
    line: dict[str, Any]
    arrival: int
    work_total: int  # replica x ms
    pod_gpus: dict[str, int]  # milli-GPUs per pod, by group
    per_replica: dict[str, int]
    work_groups: list[str]
    spec: dict[str, Any] = field(default_factory=dict)  # as last sent
    arrived: bool = False
    ended: bool = False
    state: str = "PENDING"
    work_done: int = 0
    rate: int = 0
    gpus: int = 0
    run_gpu: int = 0  # milli-GPU x ms held in the current run
    lost: int = 0
    start: int | None = None
    end: int | None = None
    evictions: int = 0
    evicted_at: int = -1
    announced: set[tuple[str, int]] = field(default_factory=set)


def jobs_of(trace: Path) -> list[Job]:
    jobs = []
    for text in trace.read_text().splitlines():
        line = json.loads(text)
        groups = line["groups"]
        names = [g["name"] for g in groups]
        work = [n for n in names if n != "head"] or names
        per = {g["name"]: int(g.get("pods_per_replica", 1)) for g in groups}
        replicas = sum(int(g["desired_count"]) // per[g["name"]]
                       for g in groups if g["name"] in work)
        runtime = round(float(line["runtime"]) * 1000)
        jobs.append(Job(
            line=line, arrival=round(float(line["arrival"]) * 1000),
            work_total=runtime * max(1, replicas),
            pod_gpus={g["name"]: parse_quantity(
                str(g.get("resources", {}).get(GPU, 0)), GPU)
                for g in groups},
            per_replica=per, work_groups=work))
    return jobs


class Clock:
    """The server's standard input and output under --test-clock."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def say(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer.startswith("ok "), f"{line!r}: {answer!r}"
        return answer


def replay(config: Path, jobs: list[Job], tmp: Path) -> int:
    """Drives the real server through the trace; returns the cycles run."""
    port = free_port()
    stderr = open(tmp / "server.stderr", "w")
    proc = subprocess.Popen(
        [SERVER, "--ephemeral", f"--test-clock={EPOCH}",
         f"--listen=127.0.0.1:{port}", "--metrics-listen=",
         f"--config={config}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
        text=True)
    client = gangsched.Client(f"127.0.0.1:{port}", timeout=10)
    try:
        wait_until(lambda: proc.poll() is not None or _serving(client), 10,
                   "the server to serve")
        assert proc.poll() is None, (tmp / "server.stderr").read_text()
        return _drive(Clock(proc), client, jobs)
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)
        stderr.close()


def _serving(client: gangsched.Client) -> bool:
    try:
        client.list_queues()
        return True
    except gangsched.GangschedError:
        return False


def _drive(clock: Clock, client: gangsched.Client, jobs: list[Job]) -> int:
    confirms: list[tuple[int, int, Job, list[tuple[str, int]]]] = []
    seq = 0
    t = 0
    cycles = 0
    by_id = {j.line["id"]: j for j in jobs}
    while True:
        clock.say(f"at {EPOCH + t / 1000:.3f}")
        # Work and GPU time up to t at the rates the last cycle set.
        for j in jobs:
            if not j.arrived or j.ended:
                continue
            j.work_done += j.rate * TICK_MS if t > 0 else 0
            held = j.gpus * (TICK_MS if t > 0 else 0)
            if j.state == "RELEASING":
                j.lost += held
            else:
                j.run_gpu += held
        # 1. Work that is done ends (trace order).
        for j in jobs:
            if j.arrived and not j.ended and j.rate > 0 and \
                    j.work_done >= j.work_total:
                j.ended, j.end, j.rate, j.gpus = True, t, 0, 0
                client.release(j.line["id"])
        # 2. Confirmations that fall due (in the order announced).
        confirms.sort(key=lambda c: (c[0], c[1]))
        while confirms and confirms[0][0] <= t:
            _, _, j, slots = confirms.pop(0)
            j.announced -= set(slots)
            if j.ended:
                continue
            try:
                client.release(j.line["id"], slots=[f"{g}/{i}"
                                                    for g, i in slots])
            except gangsched.GangschedError:
                pass  # released meanwhile: nothing is left to confirm
        # 3. Arrivals.
        for j in jobs:
            if not j.arrived and grid(j.arrival) <= t:
                j.spec = {k: v for k, v in j.line.items()
                          if k not in ("arrival", "runtime", "scale")}
                # A trace's counts default to desired_count.
                j.spec["groups"] = [
                    {"min_count": g["desired_count"],
                     "max_count": g["desired_count"], **g}
                    for g in j.spec["groups"]]
                client.allocate(j.spec)
                j.arrived = True
        # 4. User scale changes: the same Allocate with new counts.
        for j in jobs:
            for ev in j.line.get("scale", []):
                at = grid(round(float(ev["at"]) * 1000))
                if at != t or not j.arrived or j.ended:
                    continue
                for g in j.spec["groups"]:
                    if g["name"] == ev["group"]:
                        g["desired_count"] = ev["desired_count"]
                client.allocate(j.spec)
        clock.say("cycle")
        cycles += 1
        # What the cycle decided.
        listed, _ = client.list_workloads()
        for w in listed:
            j = by_id[w.spec.id]
            if j.ended:
                continue
            state = _stubs.types_pb2.WorkloadState.Name(w.state)
            state = state.removeprefix("WORKLOAD_STATE_")
            if j.state == "RUNNING" and state != "RUNNING":
                j.lost += j.run_gpu  # evicted as a whole: the run is lost
                j.run_gpu = 0
                j.work_done = 0
            if state == "RUNNING" and j.state != "RUNNING":
                j.run_gpu = 0
                if j.start is None:
                    j.start = t
            j.state = state
            own = [e for e in w.evictions if e.workload_id == w.spec.id]
            evicting = {(s.group, s.index) for e in own for s in e.slots}
            fresh = sorted(evicting - j.announced)
            if fresh:
                j.announced |= set(fresh)
                confirms.append((grid(t + DELAY_MS), seq, j, fresh))
                seq += 1
                if j.evicted_at != t:
                    j.evicted_at = t
                    j.evictions += 1
            bound = {(b.group, b.index) for b in w.bindings}
            j.gpus = sum(j.pod_gpus[g] for g, _ in bound)
            j.rate = 0
            if state == "RUNNING":
                for g in j.work_groups:
                    per = j.per_replica[g]
                    firsts = {i - i % per for gg, i in bound if gg == g}
                    j.rate += sum(
                        all((g, f + k) in bound and (g, f + k) not in
                            evicting for k in range(per))
                        for f in firsts)
        if all(j.ended for j in jobs):
            return cycles
        assert t < 10 * 24 * 3600 * 1000, "the replay never ends"
        t += TICK_MS


def formatted(milli_gpu_ms: int) -> str:
    """GPU-seconds as gangsched-sim writes them (3 places, half up)."""
    scaled = (milli_gpu_ms * 1000 * 2 + 10**6) // (2 * 10**6)
    whole, frac = divmod(scaled, 1000)
    return f"{whole}.{frac:03d}".rstrip("0").rstrip(".")


def seconds(ms: int | None) -> str:
    if ms is None:
        return ""
    return formatted(ms * 1000)


# The example trace (60 workloads over 4.6 hours: elastic gangs, reclaims,
# min runtimes) and a dense one made for this test (40 workloads in 20
# minutes: arrivals, completions and confirmations on the same ticks,
# inference preempting training, replicas of 2 pods, scale events).
TRACES = {"example": EXAMPLES / "trace.jsonl",
          "dense": Path(__file__).parent / "data" / "dense.jsonl"}


@pytest.mark.parametrize("name", ["even-split", "production-first"])
@pytest.mark.parametrize("trace_name", sorted(TRACES))
def test_sim_decides_as_the_server(trace_name: str, name: str,
                                   tmp_path: Path) -> None:
    config = EXAMPLES / f"{name}.yaml"
    trace = TRACES[trace_name]
    out = tmp_path / "sim"
    run = subprocess.run(
        [SIM, f"--trace={trace}", f"--config={config}", f"--out={out}",
         f"--tick={TICK_MS // 1000}"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    with open(out / "workloads.csv") as f:  # one config: no subfolder
        sim = {r["id"]: r for r in csv.DictReader(f)}

    jobs = jobs_of(trace)
    cycles = replay(config, jobs, tmp_path)
    server = {j.line["id"]: {
        "start": seconds(j.start), "end": seconds(j.end),
        "evictions": str(j.evictions), "lost_gpu_seconds": formatted(j.lost)}
        for j in jobs}
    differ = [
        f"{wid}: sim {[r[k] for k in server[wid]]} server "
        f"{list(server[wid].values())}"
        for wid, r in sim.items() if any(r[k] != v
                                         for k, v in server[wid].items())]
    assert not differ, "\n".join(differ)
    # The trace exercises what the check is for: evictions, lost work,
    # and waits.
    assert sum(j.evictions for j in jobs) >= 5
    assert any(j.start is not None and j.start - j.arrival > 600_000
               for j in jobs)
    if trace_name == "dense":
        assert any(j.lost > 0 for j in jobs)
        assert any(j.line.get("scale") and j.end for j in jobs)
    assert cycles > 200


@pytest.mark.parametrize("args", [
    [],  # keeps a data dir
    ["--ephemeral", "--role=frontend", "--core=127.0.0.1:1"],
    ["--ephemeral", "--store=etcd"],
])
def test_the_test_clock_is_only_for_a_server_that_keeps_nothing(
        args: list[str]) -> None:
    run = subprocess.run([SERVER, f"--test-clock={EPOCH}", *args],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode != 0
    assert "--test-clock is a test hook: only with --ephemeral" in run.stderr


def _start_clocked(tmp: Path) -> tuple[subprocess.Popen, gangsched.Client]:
    port = free_port()
    proc = subprocess.Popen(
        [SERVER, "--ephemeral", f"--test-clock={EPOCH}",
         f"--listen=127.0.0.1:{port}", "--metrics-listen="],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=open(tmp / "server.stderr", "w"))
    client = gangsched.Client(f"127.0.0.1:{port}", timeout=10)
    wait_until(lambda: proc.poll() is not None or _serving(client), 10,
               "the server to serve")
    return proc, client


def test_a_reader_gone_does_not_stop_the_server(tmp_path: Path) -> None:
    proc, client = _start_clocked(tmp_path)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdout.close()  # nobody reads the answers any more
        proc.stdin.write(b"cycle\ncycle\n")
        proc.stdin.flush()
        wait_until(lambda: b"cannot write standard output" in
                   (tmp_path / "server.stderr").read_bytes(), 10,
                   "the server to say its output is gone")
        assert proc.poll() is None
        assert _serving(client)
    finally:
        client.close()
        proc.terminate()
        assert proc.wait(10) == 0


def test_answers_nobody_reads_do_not_hold_up_a_shutdown(
        tmp_path: Path) -> None:
    proc, client = _start_clocked(tmp_path)
    client.close()
    assert proc.stdin is not None
    # Answers for more than the 64 KiB its output pipe holds, never read
    # (and few enough lines for its input pipe to take the rest).
    proc.stdin.write(b"cycle\n" * 12000)
    proc.stdin.close()
    proc.terminate()
    assert proc.wait(10) == 0


@pytest.mark.parametrize("fd", [0, 1])
def test_the_test_clock_needs_its_input_and_output(fd: int) -> None:
    run = subprocess.run(
        [SERVER, "--ephemeral", f"--test-clock={EPOCH}",
         "--listen=127.0.0.1:0", "--metrics-listen="],
        stderr=subprocess.PIPE, text=True, timeout=30,
        preexec_fn=lambda: os.close(fd))
    assert run.returncode == 2
    assert "--test-clock needs standard input and output open" in run.stderr


def _say(proc: subprocess.Popen, line: str) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{line}\n".encode())
    proc.stdin.flush()
    answer = proc.stdout.readline().decode().strip()
    assert answer.startswith("ok "), f"{line!r}: {answer!r}"


def test_explain_and_dry_runs_decide_at_the_test_clock(tmp_path: Path) -> None:
    """Explain and a dry run run their cycle at the core's clock: under
    --test-clock a min runtime that has not passed in test time still holds
    (they once decided at the wall clock, years after the test clock, and so
    foretold a preemption the cycle would not make)."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "priority_classes:\n"
        "  - {name: train, value: 50, preemptible: true}\n"
        "  - {name: inference, value: 125, preemptible: false}\n"
        "default_priority_class: train\n")
    port = free_port()
    proc = subprocess.Popen(
        [SERVER, "--ephemeral", f"--test-clock={EPOCH}",
         f"--listen=127.0.0.1:{port}", "--metrics-listen=",
         f"--config={config}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=open(tmp_path / "server.stderr", "w"))
    client = gangsched.Client(f"127.0.0.1:{port}", timeout=10)
    try:
        wait_until(lambda: proc.poll() is not None or _serving(client), 10,
                   "the server to serve")
        client.upsert_queue({"name": "q", "preempt_min_runtime": 600,
                             "resources": {GPU: {"quota": "8"}}})
        client.upsert_nodes([{"name": "n0", "allocatable": {
            "cpu": "64", "memory": "512Gi", GPU: "8"}}])

        def spec(wid: str, cls: str, pods: int) -> dict[str, Any]:
            return {"id": wid, "queue": "q", "priority_class": cls,
                    "groups": [{"name": "w", "resources": {GPU: "1"},
                                "min_count": pods, "desired_count": pods}]}

        client.allocate(spec("low", "train", 8))
        _say(proc, "cycle")
        assert client.get_workload("low").state == 3  # RUNNING
        client.allocate(spec("high", "inference", 4))
        _say(proc, f"at {EPOCH + 60}")
        # low has run one minute of its ten: nothing may be preempted yet.
        held = client.explain("high").text
        assert "preempt_min_runtime" in held, held
        assert "A preemption would evict" not in held, held
        assert client.allocate(spec("high", "inference", 4),
                               dry_run=True).state == 1  # PENDING
        _say(proc, f"at {EPOCH + 601}")
        due = client.explain("high").text
        assert "A preemption would evict: low" in due, due
        assert client.allocate(spec("high", "inference", 4),
                               dry_run=True).state == 2  # PIPELINED
        _say(proc, "cycle")
        assert client.get_workload("high").state == 2  # as foretold
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)
