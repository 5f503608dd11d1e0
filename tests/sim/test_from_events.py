"""The converter from a real gangsched's history (sim/tools/
gangsched_sim_from_events.py): a real server, workloads allocated and
released through the Python client, the log and the list read with
gangschedctl's JSON, converted to a trace that gangsched-sim replays."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GANGSCHED_BUILD_DIR", ROOT / "build"))
SERVER = os.environ.get("GANGSCHED_SERVER", str(BUILD / "server/gangsched"))
CTL = os.environ.get("GANGSCHED_CTL",
                     str(BUILD / "clients/gangschedctl/gangschedctl"))
SIM = os.environ.get("GANGSCHED_SIM", str(BUILD / "sim/gangsched-sim"))
CONVERT = ROOT / "sim" / "tools" / "gangsched_sim_from_events.py"
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "clients" / "python"),
                str(BUILD / "clients" / "python")]

import gangsched  # noqa: E402
from server_process import ServerProcess  # noqa: E402

CONFIG = """
queues:
  - name: a
  - name: b
nodes:
  - {name: n1, allocatable: {nvidia.com/gpu: "8", cpu: "64", memory: 256Gi}}
"""


def spec(wid: str, queue: str, pods: int, minimum: int) -> object:
    return gangsched.workload_spec({
        "id": wid, "queue": queue, "priority_class": "train",
        "groups": [{"name": "head", "desired_count": 1,
                    "resources": {"cpu": "1"}},
                   {"name": "worker", "min_count": minimum,
                    "desired_count": pods,
                    "resources": {"nvidia.com/gpu": "1", "cpu": "1"}}]})


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    d = tmp_path_factory.mktemp("history")
    server = ServerProcess(SERVER, ["--tick-seconds", "0.1"], config=CONFIG)
    server.start()
    client = gangsched.Client(f"127.0.0.1:{server.port}", timeout=5)
    ctl = [CTL, "--server", f"127.0.0.1:{server.port}", "-o", "json"]
    log = open(d / "events.jsonl", "w")
    # Recording from now on, as a team keeps it running.
    watch = subprocess.Popen([*ctl, "watch"], stdout=log,
                             stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        # done: 4 workers for 1.5 s; elastic: 8 wanted, only 4 GPUs free
        # for 1 s, then 8 for 1 s; never: still running when the log ends.
        client.allocate(spec("ml/done", "a", 4, 4))
        time.sleep(0.3)
        client.allocate(spec("ml/elastic", "b", 8, 2))
        time.sleep(1.2)
        client.release("ml/done")
        time.sleep(1.0)
        client.release("ml/elastic")
        client.allocate(spec("ml/running", "a", 2, 2))
        time.sleep(0.5)
        listed = subprocess.run([*ctl, "workloads", "list"],
                                capture_output=True, text=True, timeout=30)
        assert listed.returncode == 0, listed.stderr
    finally:
        watch.terminate()
        watch.wait(10)
        log.close()
        client.close()
        server.stop()
    (d / "workloads.json").write_text(listed.stdout)
    return d


def convert(d: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CONVERT), f"--events={d / 'events.jsonl'}",
         f"--workloads={d / 'workloads.json'}", f"--out={d / 'trace.jsonl'}"],
        capture_output=True, text=True, timeout=60)


def test_a_recorded_history_becomes_a_trace(history):
    done = convert(history)
    assert done.returncode == 0, done.stderr
    assert "2 workloads; 1 left out" in done.stderr
    lines = [json.loads(x) for x in
             (history / "trace.jsonl").read_text().splitlines()]
    by_id = {x["id"]: x for x in lines}
    assert sorted(by_id) == ["ml/done", "ml/elastic"]
    first = by_id["ml/done"]
    assert first["arrival"] == 0
    assert first["queue"] == "a" and first["priority_class"] == "train"
    assert [g["name"] for g in first["groups"]] == ["head", "worker"]
    assert first["groups"][1]["desired_count"] == 4
    assert first["groups"][1]["resources"]["nvidia.com/gpu"] == "1"
    # 1.5 s at all its replicas (the log's times are the server's clock).
    assert 1.2 < first["runtime"] < 1.9
    second = by_id["ml/elastic"]
    assert 0.2 < second["arrival"] < 0.7
    assert second["groups"][1]["min_count"] == 2
    # 4 of 8 replicas for ~1.2 s, then 8 for ~1 s: (4 x 1.2 + 8 x 1) / 8.
    assert 1.2 < second["runtime"] < 2.0


def test_gangsched_sim_replays_the_converted_trace(history, tmp_path):
    assert convert(history).returncode == 0
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG)
    done = subprocess.run([SIM, f"--trace={history / 'trace.jsonl'}",
                           f"--config={config}", "--tick=0.1",
                           f"--out={tmp_path / 'out'}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = (tmp_path / "out" / "workloads.csv").read_text().splitlines()
    assert len(rows) == 3 and all(r.split(",")[5] for r in rows[1:])


def test_bad_input_is_refused(tmp_path):
    events = tmp_path / "e.jsonl"
    events.write_text("{not json\n")
    workloads = tmp_path / "w.json"
    workloads.write_text('{"workloads": []}')
    done = subprocess.run([sys.executable, str(CONVERT),
                           f"--events={events}", f"--workloads={workloads}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "events line 1: not JSON" in done.stderr
