#!/usr/bin/python3
"""What a quiet server with a backlog costs (docs/ARCHITECTURE.md,
"Event-driven cycles"): the CPU the server process uses over SECONDS with no
request at all.

    /usr/bin/python3 bench/load/idle_cpu.py [SERVER_BINARY] [NODES] [WAITING] [SECONDS]

Starts the server (--ephemeral, pinned with `taskset -c 1`) on free
loopback ports, adds NODES nodes of 8 GPUs (default 2,000), fills every
node with gangs of 4 whole-node pods, then submits WAITING gangs (default
1,000) of 2 to 6 pods of 1 to 8 GPUs, which cannot fit (500 at a time, so
the fill takes few cycles). After 5 s it reads the process's CPU time,
waits SECONDS (default 30) and reads it again. Prints the share of a core
used, the cycles run and the ticks skipped meanwhile.
"""

import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))

import server_process  # noqa: E402


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build/server/gangsched")
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    waiting = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 30
    server_process.python_stubs(REPO, "gangsched-idle-stubs-")
    from gangsched.v1 import scheduler_pb2, scheduler_pb2_grpc, types_pb2

    config = ("queues:\n"
              "  - name: production\n"
              "    resources:\n"
              "      nvidia.com/gpu: {quota: %d, limit: -1}\n" % (nodes * 8))
    server = server_process.ServerProcess(binary, ["--ephemeral"], config=config)
    server.args = ["taskset", "-c", "1"] + server.args
    server.start()
    try:
        sched = scheduler_pb2_grpc.SchedulerStub(server.channel)
        for first in range(0, nodes, 500):
            sched.UpsertNodes(scheduler_pb2.UpsertNodesRequest(nodes=[
                types_pb2.Node(name="n%05d" % i, allocatable={
                    "cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8"})
                for i in range(first, min(nodes, first + 500))]), timeout=60)

        def submit(specs):
            for start in range(0, len(specs), 500):
                futures = [sched.Allocate.future(
                    scheduler_pb2.AllocateRequest(workload=spec), timeout=600)
                    for spec in specs[start:start + 500]]
                for f in futures:
                    f.result()

        def gang(wid, pods, gpus, cpus):
            return types_pb2.WorkloadSpec(id=wid, queue="production", groups=[
                types_pb2.GroupSpec(name="g", resources={
                    "nvidia.com/gpu": str(gpus), "cpu": str(cpus)},
                    min_count=pods, desired_count=pods)])

        submit([gang("run%d" % i, 4, 8, 1) for i in range(nodes // 4)])
        submit([gang("wait%d" % i, 2 + i % 5, 1 + i % 8, 1 + i % 13)
                for i in range(waiting)])
        time.sleep(5)

        def counters():
            text = server.scrape()
            return (server_process.metric_value(
                        text, "gangsched_scheduling_cycle_duration_seconds_count") or 0,
                    server_process.metric_value(
                        text, "gangsched_idle_ticks_skipped_total") or 0)

        cycles0, skipped0 = counters()
        cpu0, t0 = cpu_seconds(server.proc.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = cpu_seconds(server.proc.pid), time.monotonic()
        cycles1, skipped1 = counters()
        print("%d nodes, %d waiting: idle CPU %.1f %% of a core over %.0f s; "
              "%d cycles, %d ticks skipped"
              % (nodes, waiting, 100 * (cpu1 - cpu0) / (t1 - t0), t1 - t0,
                 cycles1 - cycles0, skipped1 - skipped0))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
