"""gangsched-sim as a user runs it: the shipped example, several configs,
the same bytes from separate processes, the seed, and errors that name the
line and the field (docs/SIMULATOR.md)."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIM = os.environ.get("GANGSCHED_SIM", str(ROOT / "build/sim/gangsched-sim"))
EXAMPLES = ROOT / "sim" / "examples"
TRACE = EXAMPLES / "trace.jsonl"
EVEN = EXAMPLES / "even-split.yaml"
FIRST = EXAMPLES / "production-first.yaml"
FILES = ("workloads.csv", "queues.csv", "cluster.csv", "queue_timeline.csv")


def sim(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([SIM, *args], capture_output=True, text=True,
                          timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def same_files(a: Path, b: Path, names=FILES) -> bool:
    match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    return not mismatch and not errors


def test_one_config_writes_the_four_files_and_the_comparison(tmp_path):
    done = sim(f"--trace={TRACE}", f"--config={EVEN}", f"--out={tmp_path}")
    assert "60 workloads, 60 ended" in done.stderr
    for name in FILES + ("comparison.csv",):
        assert (tmp_path / name).stat().st_size > 0, name
    rows = (tmp_path / "workloads.csv").read_text().splitlines()
    assert rows[0] == ("id,queue,priority_class,arrival,start,end,"
                       "evictions,lost_gpu_seconds,saved_gpu_seconds")
    assert len(rows) == 61
    first = rows[1].split(",")
    assert first[:4] == ["research/job-00", "research", "train", "35"]
    assert first[4] == "35" and first[5]  # started at once, ended
    queues = (tmp_path / "queues.csv").read_text().splitlines()
    assert [q.split(",")[0] for q in queues[1:]] == ["production",
                                                     "research"]


def test_separate_runs_write_the_same_bytes(tmp_path):
    for out in ("a", "b"):
        sim(f"--trace={TRACE}", f"--config={EVEN}", f"--config={FIRST}",
            f"--out={tmp_path / out}")
    for run in ("even-split", "production-first"):
        assert same_files(tmp_path / "a" / run, tmp_path / "b" / run), run
    assert same_files(tmp_path / "a", tmp_path / "b", ["comparison.csv"])


def test_several_configs_side_by_side_equal_their_own_runs(tmp_path):
    sim(f"--trace={TRACE}", f"--config={EVEN}", f"--config={FIRST}",
        f"--out={tmp_path / 'both'}")
    sim(f"--trace={TRACE}", f"--config={FIRST}", f"--out={tmp_path / 'one'}")
    assert same_files(tmp_path / "both" / "production-first",
                      tmp_path / "one")
    rows = (tmp_path / "both" / "comparison.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["even-split",
                                                   "production-first"]
    assert not (tmp_path / "both" / "workloads.csv").exists()
    # A config named twice gets a folder each, never one taken already.
    sim(f"--trace={TRACE}", f"--config={EVEN}", f"--config={EVEN}",
        f"--out={tmp_path / 'twice'}")
    assert (tmp_path / "twice" / "even-split-2" / "workloads.csv").exists()
    other = tmp_path / "x"
    other.mkdir()
    (other / "even-split.yaml").write_text(FIRST.read_text())
    (tmp_path / "even-split-2.yaml").write_text(EVEN.read_text())
    sim(f"--trace={TRACE}", f"--config={EVEN}",
        f"--config={other}/even-split.yaml",
        f"--config={tmp_path}/even-split-2.yaml", f"--out={tmp_path / 'three'}")
    rows = (tmp_path / "three" / "comparison.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == [
        "even-split", "even-split-2", "even-split-2-2"]
    assert same_files(tmp_path / "three" / "even-split-2",
                      tmp_path / "one")


def test_the_seed_draws_the_eviction_jitter(tmp_path):
    def run(out: str, seed: int) -> None:
        sim(f"--trace={TRACE}", f"--config={FIRST}", f"--out={tmp_path / out}",
            "--eviction-jitter=20", f"--seed={seed}")
    run("a", 1)
    run("b", 1)
    run("c", 2)
    assert same_files(tmp_path / "a", tmp_path / "b")
    assert not same_files(tmp_path / "a", tmp_path / "c")


def test_no_paths_or_process_ids_in_the_outputs(tmp_path):
    out = tmp_path / "out"
    done = sim(f"--trace={TRACE}", f"--config={EVEN}", f"--out={out}")
    text = "".join((out / n).read_text() for n in FILES + ("comparison.csv",))
    assert str(tmp_path) not in text and str(ROOT) not in text
    assert str(done.args) not in text


def test_help_states_the_interface():
    done = sim("--help")
    for flag in ("--trace=FILE", "--config=FILE", "--out=DIR", "--seed=N",
                 "--tick=SECONDS"):
        assert flag in done.stdout
    assert "default 1)" in done.stdout


@pytest.mark.parametrize("line,message", [
    ('{"id": "x", "arrival": 0, "runtime": 5, "queue": "research", '
     '"groups": [{"name": "w", "desired_count": 2, "min_count": 3}]}',
     "trace line 2: workload.groups[0]"),
    ('{"id": "x", "arrival": 0, "runtime": 5, "queue": "research", '
     '"groups": [{"name": "w", "desired_count": 1, '
     '"resources": {"nvidia.com/gpu": "one"}}]}',
     'trace line 2: workload.groups[0].resources["nvidia.com/gpu"]'),
    ('{"id": "x", "arrival": 0, "runtime": 5, "queue": "nobody", '
     '"groups": [{"name": "w", "desired_count": 1}]}',
     'trace line 2: queue: "nobody" is not a queue of the config'),
    ("not json", "trace line 2: not a JSON object"),
])
def test_a_bad_trace_line_is_refused_by_line_and_field(tmp_path, line,
                                                       message):
    trace = tmp_path / "t.jsonl"
    trace.write_text(TRACE.read_text().splitlines()[0] + "\n" + line + "\n")
    done = sim(f"--trace={trace}", f"--config={EVEN}",
               f"--out={tmp_path / 'out'}", check=False)
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "out" / "workloads.csv").exists()


@pytest.mark.parametrize("args,message", [
    (["--tick=0"], "--tick: must be at least 0.001"),
    (["--tick=fast"], "--tick: \"fast\" is not a number of seconds"),
    (["--seed=-1"], "--seed:"),
    (["--colour=red"], "unknown flag --colour"),
    (["--config=/nonexistent.yaml"], "/nonexistent.yaml is not a file"),
    (["--config=/tmp"], "--config: /tmp is not a file"),
])
def test_bad_flags_are_refused(tmp_path, args, message):
    done = sim(f"--trace={TRACE}", f"--config={EVEN}",
               f"--out={tmp_path / 'out'}", *args, check=False)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_a_bad_config_is_refused_with_its_field(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("queues:\n  - name: research\n    resources:\n"
                      "      nvidia.com/gpu: {quota: lots}\n")
    done = sim(f"--trace={TRACE}", f"--config={config}",
               f"--out={tmp_path / 'out'}", check=False)
    assert done.returncode == 2
    assert 'resources["nvidia.com/gpu"].quota' in done.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_out_must_be_a_directory(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    done = sim(f"--trace={TRACE}", f"--config={EVEN}", f"--out={afile}",
               check=False)
    assert done.returncode == 2
    assert "is not a directory" in done.stderr
    done = sim(f"--trace={tmp_path}", f"--config={EVEN}",
               f"--out={tmp_path / 'o'}", check=False)
    assert done.returncode == 2
    assert "--trace:" in done.stderr
