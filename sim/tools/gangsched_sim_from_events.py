#!/usr/bin/python3
"""A gangsched-sim trace from what a real gangsched recorded: its event log
and its workloads' specs, as gangschedctl prints them in JSON, so a team can
replay its own history under another config (docs/SIMULATOR.md, "Traces
from a real cluster").

  gangschedctl -o json watch > events.jsonl   # started first, kept running
  gangschedctl -o json workloads list > workloads.json
  sim/tools/gangsched_sim_from_events.py --events=events.jsonl \\
      --workloads=workloads.json > trace.jsonl

Each workload that ran to its end becomes one line: its spec as submitted
(queue, class, groups), its arrival (first seen, relative to the earliest),
and its run time at its desired replicas, worked out from its last run as
the model counts work (docs/SIMULATOR.md, "The model": replicas x time).
Workloads still running or never run at the end of the log are left out
and counted on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from dataclasses import dataclass, field
from typing import Any, IO

HEAD = "head"


def parse_time(text: str) -> float:
    """An RFC 3339 timestamp (protobuf's JSON) -> seconds since the epoch."""
    text = text.rstrip("Z")
    if "." in text:
        whole, frac = text.split(".", 1)
        frac = (frac + "000000")[:6]
        text = f"{whole}.{frac}"
        fmt = "%Y-%m-%dT%H:%M:%S.%f"
    else:
        fmt = "%Y-%m-%dT%H:%M:%S"
    moment = datetime.datetime.strptime(text, fmt)
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


@dataclass
class History:
    """What the log says of one workload."""
    first_seen: float
    bound: set[tuple[str, int]] = field(default_factory=set)
    run_started: float | None = None  # the current run's first bind
    replica_seconds: float = 0.0       # of the current run
    last_change: float = 0.0
    ended_at: float | None = None
    runtime_work: float | None = None  # replica-seconds of the last run


def work_groups(spec: dict) -> list[dict]:
    groups = spec.get("groups") or []
    workers = [g for g in groups if g.get("name") != HEAD]
    return workers or groups


def replicas(bound: set[tuple[str, int]], spec: dict) -> float:
    """Replicas of the work groups whose pods are all bound."""
    count = 0
    for g in work_groups(spec):
        per = int(g.get("pods_per_replica") or 1)
        slots = {i for (name, i) in bound if name == g.get("name")}
        for first in {i - i % per for i in slots}:
            if all(first + k in slots for k in range(per)):
                count += 1
    return float(count)


def desired_replicas(spec: dict) -> int:
    return max(1, sum(int(g.get("desired_count") or 0) //
                      int(g.get("pods_per_replica") or 1)
                      for g in work_groups(spec)))


def read_events(stream: IO[str]) -> list[dict]:
    events = []
    for n, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except ValueError as e:
            raise ValueError(f"events line {n}: not JSON ({e})") from None
    events.sort(key=lambda e: int(e.get("revision") or 0))
    return events


def convert(events: list[dict], workloads: list[dict],
            out: IO[str]) -> tuple[int, int]:
    specs = {w["spec"]["id"]: w for w in workloads if w.get("spec")}
    history: dict[str, History] = {}
    for ev in events:
        wid = ev.get("workload_id") or ""
        if wid not in specs or not ev.get("time"):
            continue
        spec = specs[wid]["spec"]
        t = parse_time(ev["time"])
        h = history.get(wid)
        if h is None:
            created = specs[wid].get("created_time")
            h = history[wid] = History(
                first_seen=parse_time(created) if created else t,
                last_change=t)
        if h.run_started is not None:
            h.replica_seconds += replicas(h.bound, spec) * (t - h.last_change)
        h.last_change = t
        kind = ev.get("type", "")
        if kind == "EVENT_TYPE_BOUND":
            for b in ev.get("bindings") or []:
                h.bound.add((b.get("group", ""), int(b.get("index") or 0)))
            if h.run_started is None:
                h.run_started, h.replica_seconds = t, 0.0
        elif kind == "EVENT_TYPE_RELEASED":
            for s in ev.get("released_slots") or []:
                h.bound.discard((s.get("group", ""), int(s.get("index") or 0)))
        state = ev.get("state", "")
        if state == "WORKLOAD_STATE_RELEASED" and h.run_started is not None:
            h.ended_at, h.runtime_work = t, h.replica_seconds
            h.run_started, h.bound = None, set()
        elif state in ("WORKLOAD_STATE_PENDING",
                       "WORKLOAD_STATE_RELEASING") and not h.bound:
            h.run_started = None  # evicted whole: the next run starts over
    done = [(h.first_seen, wid, h) for wid, h in history.items()
            if h.runtime_work is not None and h.runtime_work > 0]
    done.sort()
    zero = min((h.first_seen for h in history.values()), default=0.0)
    for first_seen, wid, h in done:
        spec = specs[wid]["spec"]
        groups = []
        for g in spec.get("groups") or []:
            group: dict[str, Any] = {
                "name": g["name"],
                "min_count": int(g.get("min_count") or 0),
                "desired_count": int(g.get("desired_count") or 0),
                "max_count": int(g.get("max_count") or 0) or
                int(g.get("desired_count") or 0),
                "pods_per_replica": int(g.get("pods_per_replica") or 1),
                "resources": dict(g.get("resources") or {})}
            if g.get("node_selector"):
                group["node_selector"] = dict(g["node_selector"])
            if g.get("gpu_fraction"):
                group["gpu_fraction"] = g["gpu_fraction"]
            if g.get("gpu_memory"):
                group["gpu_memory"] = g["gpu_memory"]
            groups.append(group)
        runtime = h.runtime_work / desired_replicas(spec)
        line = {"id": wid, "arrival": round(first_seen - zero, 3),
                "runtime": max(0.001, round(runtime, 3)),
                "queue": specs[wid].get("queue") or spec.get("queue", ""),
                "groups": groups}
        if spec.get("priority_class"):
            line["priority_class"] = spec["priority_class"]
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
    return len(done), len(history) - len(done)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Writes a gangsched-sim trace (JSON Lines) from "
                    "gangschedctl's JSON event log and workload list.")
    ap.add_argument("--events", required=True,
                    help="gangschedctl -o json watch, kept running while "
                         "the workloads came and went (JSON Lines)")
    ap.add_argument("--workloads", required=True,
                    help="gangschedctl -o json workloads list")
    ap.add_argument("--out", default="-", help="file (default: stdout)")
    args = ap.parse_args(argv)
    try:
        with open(args.events) as f:
            events = read_events(f)
        with open(args.workloads) as f:
            listed = json.load(f)
        workloads = listed.get("workloads") or [] \
            if isinstance(listed, dict) else listed
        out = sys.stdout if args.out == "-" else open(args.out, "w")
        try:
            written, left = convert(events, workloads, out)
        finally:
            if out is not sys.stdout:
                out.close()
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"gangsched_sim_from_events: {e}", file=sys.stderr)
        return 2
    print(f"gangsched_sim_from_events: {written} workloads; {left} left out "
          "(still running, never run, or their spec not listed)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
