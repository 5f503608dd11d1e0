#!/usr/bin/python3
"""How long a committed write takes to reach a frontend's read cache
(docs/ARCHITECTURE.md, "Frontend read cache").

    /usr/bin/python3 bench/load/replica_lag.py [SERVER_BINARY] [WRITES]

Starts a core (--role=core --ephemeral) and a frontend on free loopback
ports, adds 8 nodes, then WRITES times (default 500): an Allocate of a new
one-pod workload on the core, then ListQueues on the frontend until its
answer's revision reaches the Allocate's. ListQueues never falls back to
the core while the cache is following (GetWorkload's NOT_FOUND would), so
the time is the cache's: replication, apply, and one read round trip.
Prints p50 / p90 / p99 / max in milliseconds and the reads it took.
"""

import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))

import server_process  # noqa: E402


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build/server/gangsched")
    writes = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    server_process.python_stubs(REPO, "gangsched-lag-stubs-")
    from gangsched.v1 import admin_pb2, admin_pb2_grpc, scheduler_pb2, \
        scheduler_pb2_grpc, types_pb2

    core = server_process.ServerProcess(binary, ["--role", "core", "--ephemeral"])
    core.start()
    front = server_process.ServerProcess(
        binary, ["--role", "frontend", "--core", "127.0.0.1:%d" % core.port])
    try:
        front.start()
        sched = scheduler_pb2_grpc.SchedulerStub(core.channel)
        admin = admin_pb2_grpc.AdminStub(front.channel)
        sched.UpsertNodes(scheduler_pb2.UpsertNodesRequest(nodes=[
            types_pb2.Node(name="n%d" % i, allocatable={"cpu": "1000"})
            for i in range(8)]), timeout=5)
        def following():
            value = server_process.metric_value(front.scrape(),
                                                "gangsched_read_cache_revision")
            return value is not None and value >= 0
        server_process.wait_until(following, 10, "the frontend's cache to follow")
        lags, reads = [], 0
        for i in range(writes):
            spec = types_pb2.WorkloadSpec(id="lag/w%d" % i, queue="default", groups=[
                types_pb2.GroupSpec(name="w", resources={"cpu": "1"}, min_count=1,
                                    desired_count=1, max_count=1)])
            reply = sched.Allocate(scheduler_pb2.AllocateRequest(workload=spec), timeout=5)
            start = time.monotonic()
            while True:
                reads += 1
                seen = admin.ListQueues(admin_pb2.ListQueuesRequest(), timeout=5)
                if seen.revision >= reply.revision:
                    break
            lags.append((time.monotonic() - start) * 1000)
        lags.sort()

        def pct(p):
            return lags[min(len(lags) - 1, int(p * len(lags)))]
        cached = server_process.metric_value(front.scrape(), "gangsched_frontend_reads_total",
                                             {"answered_by": "cache"})
        print("writes %d: lag to the frontend's cache p50 %.2f ms, p90 %.2f, p99 %.2f, "
              "max %.2f; %d reads (%d answered by the cache)"
              % (writes, pct(0.5), pct(0.9), pct(0.99), lags[-1], reads, cached))
    finally:
        front.stop()
        core.stop()


if __name__ == "__main__":
    main()
