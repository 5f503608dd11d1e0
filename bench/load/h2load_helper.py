#!/usr/bin/python3
"""Helper of bench/load/h2load.sh (stdlib + python3-protobuf only).

Subcommands:
  free-ports N                       N distinct free loopback TCP ports
  cluster DIR                        write DIR/config.yaml (100 queues),
                                     DIR/nodes.yaml (1,000 nodes x 8 GPUs),
                                     DIR/target.yaml (the workload read back)
  bodies STUB_DIR OUT_DIR            gRPC-framed request bodies for h2load
  verify-bodies STUB_DIR DIR ADDR    send each body once with grpcio, check replies
  scrape URL OUT                     save a /metrics scrape
  report ...                         the results table (see --help)
  ab-summary --a FILE... --b FILE... two binaries' per-round rows (report
                                     --rounds-out): medians with bootstrap
                                     95 % intervals
"""

import argparse
import json
import os
import random
import re
import socket
import statistics
import struct
import sys
import urllib.request

GPU = "nvidia.com/gpu"
NODES = 1000
GPUS_PER_NODE = 8
DEPARTMENTS = 10            # parent queues
TEAMS_PER_DEPARTMENT = 9    # leaf queues under each: 10 + 90 = 100 queues
TARGET_ID = "bench/target"
TARGET_QUEUE = "team-00-0"
DRY_RUN_ID = "bench/dry-run"
DRY_RUN_QUEUE = "team-05-3"


def cmd_free_ports(args):
    socks = []
    try:
        for _ in range(args.n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        print(" ".join(str(s.getsockname()[1]) for s in socks))
    finally:
        for s in socks:
            s.close()


def team_queue(d, t):
    return "team-%02d-%d" % (d, t)


def cmd_cluster(args):
    os.makedirs(args.dir, exist_ok=True)
    total_gpus = NODES * GPUS_PER_NODE
    dept_gpus = total_gpus // DEPARTMENTS
    team_gpus = dept_gpus // TEAMS_PER_DEPARTMENT
    lines = ["# Written by bench/load/h2load_helper.py: %d departments x %d teams"
             % (DEPARTMENTS, TEAMS_PER_DEPARTMENT),
             "# = %d queues over %d nodes x %d GPUs."
             % (DEPARTMENTS * (1 + TEAMS_PER_DEPARTMENT), NODES, GPUS_PER_NODE),
             "default_priority_class: train", "queues:"]
    for d in range(DEPARTMENTS):
        lines.append("  - name: dept-%02d" % d)
        lines.append("    resources:")
        lines.append("      %s: {quota: %d, limit: -1}" % (GPU, dept_gpus))
        lines.append("      cpu: {quota: %d}" % (NODES * 64 // DEPARTMENTS))
        for t in range(TEAMS_PER_DEPARTMENT):
            lines.append("  - name: %s" % team_queue(d, t))
            lines.append("    parent: dept-%02d" % d)
            lines.append("    resources:")
            lines.append("      %s: {quota: %d, limit: %d, over_quota_weight: 1}"
                         % (GPU, team_gpus, 4 * team_gpus))
    with open(os.path.join(args.dir, "config.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")

    lines = ["nodes:"]
    for i in range(NODES):
        lines.append("  - name: gpu-%04d" % i)
        lines.append("    allocatable: {cpu: 64, memory: 512Gi, %s: %d}" % (GPU, GPUS_PER_NODE))
        lines.append("    labels: {topology.kubernetes.io/zone: zone-%d, gangsched.io/rack: rack-%03d}"
                     % (i % 4, i // 20))
    with open(os.path.join(args.dir, "nodes.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")

    with open(os.path.join(args.dir, "target.yaml"), "w") as f:
        f.write(workload_yaml(TARGET_ID, TARGET_QUEUE))


def workload_spec_dict(wid, queue):
    """A Ray cluster: a head and 8 workers x 1 GPU (proto field names)."""
    return {
        "id": wid,
        "queue": queue,
        "priority_class": "train",
        "labels": {"ray.io/cluster": wid.split("/")[-1]},
        "placement": {"strategy": "PLACEMENT_STRATEGY_BINPACK",
                      "topology_key": "topology.kubernetes.io/zone",
                      "required": False},
        "groups": [
            {"name": "head", "resources": {"cpu": "4", "memory": "16Gi"},
             "min_count": 1, "desired_count": 1, "max_count": 1},
            {"name": "gpu-workers",
             "resources": {"cpu": "8", "memory": "64Gi", GPU: "1"},
             "min_count": 8, "desired_count": 8, "max_count": 8},
        ],
    }


def workload_yaml(wid, queue):
    # JSON is YAML; gangschedctl reads proto field names.
    return json.dumps(workload_spec_dict(wid, queue), indent=2) + "\n"


def grpc_frame(payload):
    """Length-prefixed message: 0 (uncompressed) + 4-byte big-endian length."""
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def cmd_bodies(args):
    sys.path.insert(0, args.stub_dir)
    from google.protobuf import json_format
    from gangsched.v1 import scheduler_pb2
    os.makedirs(args.out_dir, exist_ok=True)
    # grpc.health.v1.HealthCheckRequest{service: ""} serializes to 0 bytes.
    bodies = {
        "health": b"",
        "get-workload": scheduler_pb2.GetWorkloadRequest(
            workload_id=TARGET_ID).SerializeToString(),
        "allocate-dry-run": json_format.ParseDict(
            {"workload": workload_spec_dict(DRY_RUN_ID, DRY_RUN_QUEUE), "dry_run": True},
            scheduler_pb2.AllocateRequest()).SerializeToString(),
        # The running target's own spec again: a committed Allocate that
        # changes nothing (bench/load/frontend.sh).
        "allocate-again": json_format.ParseDict(
            {"workload": workload_spec_dict(TARGET_ID, TARGET_QUEUE)},
            scheduler_pb2.AllocateRequest()).SerializeToString(),
    }
    for name, payload in bodies.items():
        with open(os.path.join(args.out_dir, name + ".bin"), "wb") as f:
            f.write(grpc_frame(payload))
        print("%s: %d-byte message" % (name, len(payload)))


def cmd_verify_bodies(args):
    """Send each body once with grpcio and check the decoded reply."""
    import grpc
    sys.path.insert(0, args.stub_dir)
    from gangsched.v1 import scheduler_pb2, types_pb2

    def unframe(name):
        with open(os.path.join(args.body_dir, name + ".bin"), "rb") as f:
            data = f.read()
        flag, length = data[0], struct.unpack(">I", data[1:5])[0]
        if flag != 0 or length != len(data) - 5:
            raise SystemExit("%s.bin: bad gRPC frame (flag %d, length %d of %d)"
                             % (name, flag, length, len(data) - 5))
        return data[5:]

    running = types_pb2.WORKLOAD_STATE_RUNNING
    with grpc.insecure_channel(args.addr) as channel:
        def call(path, name, reply_cls=None):
            raw = channel.unary_unary(path)(unframe(name), timeout=10)
            if reply_cls is None:
                return raw
            reply = reply_cls()
            reply.ParseFromString(raw)
            return reply

        raw = call("/grpc.health.v1.Health/Check", "health")
        if raw != b"\x08\x01":
            raise SystemExit("Health/Check body: reply %r, want SERVING (08 01)" % raw)
        wl = call("/gangsched.v1.Scheduler/GetWorkload", "get-workload",
                  types_pb2.WorkloadStatus)
        if wl.spec.id != TARGET_ID or wl.state != running or len(wl.bindings) != 9:
            raise SystemExit("GetWorkload body: got %s %s with %d bindings"
                             % (wl.spec.id, types_pb2.WorkloadState.Name(wl.state),
                                len(wl.bindings)))
        al = call("/gangsched.v1.Scheduler/Allocate", "allocate-dry-run",
                  scheduler_pb2.AllocateResponse)
        if al.workload_id != DRY_RUN_ID or al.state != running or len(al.bindings) != 9:
            raise SystemExit("Allocate dry-run body: got %s %s with %d bindings (%s)"
                             % (al.workload_id, types_pb2.WorkloadState.Name(al.state),
                                len(al.bindings), al.pending.message))
        try:
            channel.unary_unary("/gangsched.v1.Scheduler/GetWorkload")(
                scheduler_pb2.GetWorkloadRequest(workload_id=DRY_RUN_ID).SerializeToString(),
                timeout=10)
            raise SystemExit("the dry run committed %s" % DRY_RUN_ID)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.NOT_FOUND:
                raise SystemExit("GetWorkload %s after the dry run: %s" % (DRY_RUN_ID, e.code()))
    print("grpcio with the h2load bodies: Health SERVING; GetWorkload %s RUNNING, 9 bindings; "
          "Allocate dry run RUNNING, 9 bindings, nothing committed" % TARGET_ID)


def cmd_scrape(args):
    with urllib.request.urlopen(args.url, timeout=5) as r:
        text = r.read().decode()
    with open(args.out, "w") as f:
        f.write(text)


SAMPLE_RE = re.compile(r'^gangsched_grpc_requests_total\{([^}]*)\}\s+([0-9.eE+-]+)$')


def request_counts(path):
    """{(method, code): value} of gangsched_grpc_requests_total."""
    counts = {}
    with open(path) as f:
        for line in f:
            m = SAMPLE_RE.match(line.strip())
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            counts[(labels.get("method"), labels.get("code"))] = float(m.group(2))
    return counts


def percentile(sorted_values, p):
    """Nearest-rank percentile."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(-(-p * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def parse_h2load_stdout(path):
    text = open(path, errors="replace").read()
    out = {}
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    if m:
        keys = ("total", "started", "done", "succeeded", "failed", "errored", "timeout")
        out.update(zip(keys, map(int, m.groups())))
    m = re.search(r"status codes: (\d+) 2xx", text)
    if m:
        out["2xx"] = int(m.group(1))
    m = re.search(r"traffic: .*?, .*? headers .*?, [^(]*\((\d+)\) data", text)
    if m:
        out["data_bytes"] = int(m.group(1))
    return out


def log_stats(path):
    """(rps, latencies in µs, non-200 rows) from an h2load --log-file."""
    starts, ends, lat, bad = [], [], [], 0
    with open(path) as f:
        for line in f:
            cols = line.split("\t")
            if len(cols) < 3:
                continue
            start, status, dur = int(cols[0]), int(cols[1]), int(cols[2])
            if status != 200:
                bad += 1
            starts.append(start)
            ends.append(start + dur)
            lat.append(dur)
    if not lat:
        return 0.0, [], 0
    span_s = (max(ends) - min(starts)) / 1e6
    return len(lat) / span_s if span_s > 0 else float("inf"), lat, bad


def median(values):
    return statistics.median(values) if values else float("nan")


def cmd_report(args):
    """Per endpoint: every round's rps, the median, pooled p50/p99, the OK
    check; then each round's ratio to Health/Check and the median ratio."""
    if args.requests < 1 or args.rounds < 1:
        print("FAIL: --requests and --rounds must be >= 1 (nothing was measured)")
        return 1
    before = request_counts(args.before)
    after = request_counts(args.after)
    rows, failures = [], []
    round_rps = {}   # name -> [rps per round]
    cpu_us = {}      # name -> [server CPU us per request, per round]
    total = args.requests * args.rounds
    for spec in args.endpoint:
        # name:method:expected_reply_bytes_per_request:file prefix
        name, method, reply_bytes, prefix = spec.split(":", 3)
        round_rps[name], cpu_us[name] = [], []
        answered, non_200, succeeded, data_bytes = 0, 0, 0, 0
        latencies = []
        for r in range(1, args.rounds + 1):
            rps, lat, bad = log_stats("%s.%d.log" % (prefix, r))
            h2 = parse_h2load_stdout("%s.%d.out" % (prefix, r))
            round_rps[name].append(rps)
            answered += len(lat)
            non_200 += bad
            succeeded += h2.get("succeeded", 0)
            data_bytes += h2.get("data_bytes", 0)
            latencies += lat
            ticks_path = "%s.%d.ticks" % (prefix, r)
            if os.path.exists(ticks_path):
                ticks = int(open(ticks_path).read().strip())
                cpu_us[name].append(ticks / args.tick_hz * 1e6 / args.requests)
        latencies.sort()
        checks = []
        if succeeded != total or answered != total or non_200:
            failures.append("%s: h2load sent %d, succeeded %d, log rows %d, non-200 rows %d"
                            % (name, total, succeeded, answered, non_200))
        if method != "-":
            ok_delta = int(after.get((method, "OK"), 0) - before.get((method, "OK"), 0))
            other = {code: int(after[(m, code)] - before.get((m, code), 0))
                     for (m, code) in after if m == method and code != "OK"
                     and after[(m, code)] - before.get((m, code), 0) > 0}
            if ok_delta == total and not other:
                checks.append("OK %d/%d" % (ok_delta, total))
            else:
                checks.append("FAIL OK %d/%d%s" % (ok_delta, total,
                                                   " other %s" % other if other else ""))
                failures.append("%s: gangsched_grpc_requests_total{method=\"%s\",code=\"OK\"} "
                                "rose by %d, expected %d; non-OK increases: %s"
                                % (name, method, ok_delta, total, other or "none"))
        else:
            # Not counted in gangsched_grpc_requests_total: check the reply
            # bytes instead (an error reply has no message, only trailers).
            expected = int(reply_bytes) * total
            if data_bytes == expected:
                checks.append("n/a; bytes %d/%d" % (data_bytes, expected))
            else:
                checks.append("FAIL bytes %d/%d" % (data_bytes, expected))
                failures.append("%s: reply data %d bytes, expected %d (%s x %d)"
                                % (name, data_bytes, expected, reply_bytes, total))
        rows.append((name, answered, median(round_rps[name]),
                     percentile(latencies, 50) / 1000.0, percentile(latencies, 99) / 1000.0,
                     "; ".join(checks)))

    header = ("endpoint", "requests", "rps", "p50 ms", "p99 ms", "OK-count-check")
    fmt = "%-20s %9s %10s %8s %8s  %s"
    print(fmt % header)
    for name, n, r, p50, p99, check in rows:
        print(fmt % (name, n, "%.0f" % r, "%.2f" % p50, "%.2f" % p99, check))
    if args.rounds > 1:
        print("(rps: the median of %d rounds; p50/p99 over all of them)" % args.rounds)
    base = round_rps.get("Health/Check")
    if base:
        print()
        for name, label in (("Allocate(dry_run)", "Allocate-dry-run"),
                            ("GetWorkload", "GetWorkload")):
            if name not in round_rps:
                continue
            ratios = [x / b for x, b in zip(round_rps[name], base) if b > 0]
            line = "ratio %-28s %.3f" % (label + "/Health rps:", median(ratios))
            if args.rounds > 1:
                line += "   (median; rounds: %s)" % " ".join("%.2f" % x for x in ratios)
            print(line)
    if args.rounds_out and base:
        # One line per round: dry-run/Health and GetWorkload/Health rps
        # ratios, then the server CPU per request of Health, GetWorkload and
        # the dry run in µs (nan where not measured).
        names = ("Health/Check", "GetWorkload", "Allocate(dry_run)")
        with open(args.rounds_out, "a") as out:
            for r in range(args.rounds):
                b = base[r]
                fields = [round_rps[n][r] / b if b > 0 else float("nan")
                          for n in ("Allocate(dry_run)", "GetWorkload")]
                fields += [cpu_us[n][r] if r < len(cpu_us.get(n, [])) else float("nan")
                           for n in names]
                out.write(" ".join("%.4f" % x for x in fields) + "\n")
    if any(cpu_us.values()):
        print()
        print("server CPU per request (user + system, %d Hz ticks; median of rounds):"
              % args.tick_hz)
        for name, values in cpu_us.items():
            if values:
                print("  %-20s %6.1f us" % (name, median(values)))
    print()
    if failures:
        for f in failures:
            print("FAIL: " + f)
        return 1
    print("PASS: every request answered, OK counts match")
    return 0


def bootstrap_median_interval(values, resamples=2000, seed=1):
    """A 95 % bootstrap interval of the median (seeded: reruns agree)."""
    rng = random.Random(seed)
    medians = sorted(median(rng.choices(values, k=len(values)))
                     for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def cmd_ab_summary(args):
    """Per binary: the median of every round's ratios with a bootstrap 95 %
    interval, and the median server CPU per request."""
    header = "%-6s %6s  %-26s  %-26s  %s" % (
        "binary", "rounds", "dry run / Health", "GetWorkload / Health",
        "server CPU µs/request: Health, GetWorkload, dry run")
    print(header)
    for label, files in (("A", args.a), ("B", args.b)):
        rows = []
        for path in files:
            with open(path) as f:
                rows += [[float(x) for x in line.split()] for line in f if line.strip()]
        if not rows:
            print("FAIL: no rounds for binary %s" % label)
            return 1
        cells = []
        for col in (0, 1):
            values = [r[col] for r in rows]
            lo, hi = bootstrap_median_interval(values)
            cells.append("%.3f (%.3f-%.3f)" % (median(values), lo, hi))
        cpu = []
        for col in (2, 3, 4):
            values = [r[col] for r in rows if r[col] == r[col]]
            cpu.append("%.1f" % median(values) if values else "n/a")
        print("%-6s %6d  %-26s  %-26s  %s" % (label, len(rows), cells[0], cells[1],
                                             " / ".join(cpu)))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("free-ports")
    s.add_argument("n", type=int)
    s.set_defaults(fn=cmd_free_ports)
    s = sub.add_parser("cluster")
    s.add_argument("dir")
    s.set_defaults(fn=cmd_cluster)
    s = sub.add_parser("bodies")
    s.add_argument("stub_dir")
    s.add_argument("out_dir")
    s.set_defaults(fn=cmd_bodies)
    s = sub.add_parser("verify-bodies")
    s.add_argument("stub_dir")
    s.add_argument("body_dir")
    s.add_argument("addr")
    s.set_defaults(fn=cmd_verify_bodies)
    s = sub.add_parser("scrape")
    s.add_argument("url")
    s.add_argument("out")
    s.set_defaults(fn=cmd_scrape)
    s = sub.add_parser("report")
    s.add_argument("--requests", type=int, required=True, help="per endpoint and round")
    s.add_argument("--rounds", type=int, default=1)
    s.add_argument("--tick-hz", type=int, default=100)
    s.add_argument("--before", required=True)
    s.add_argument("--after", required=True)
    s.add_argument("--endpoint", action="append", required=True,
                   help="NAME:METRIC_METHOD|-:REPLY_BYTES:PREFIX, with the files "
                        "PREFIX.ROUND.log (h2load --log-file), PREFIX.ROUND.out "
                        "(its stdout) and PREFIX.ROUND.ticks (server CPU ticks)")
    s.add_argument("--rounds-out", help="append each round's ratios and CPU here")
    s.set_defaults(fn=cmd_report)
    s = sub.add_parser("ab-summary")
    s.add_argument("--a", nargs="+", required=True, help="binary A's --rounds-out files")
    s.add_argument("--b", nargs="+", required=True, help="binary B's --rounds-out files")
    s.set_defaults(fn=cmd_ab_summary)
    args = p.parse_args()
    sys.exit(args.fn(args) or 0)


if __name__ == "__main__":
    main()
