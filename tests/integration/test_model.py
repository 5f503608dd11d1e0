#!/usr/bin/python3
"""Model-based test of the whole server: the real binary over real gRPC,
seeded random sequences of queue changes (add, re-parent, delete), config
reloads (classes added and removed, quotas changed), node changes (add,
remove, cordon, shrink, pod capacity), workload calls (allocate, resubmit
with changes, release, shrink, preempt, confirm evictions, dry runs,
retries with old request ids, reused ids with another request) and kill -9
or a clean stop, then a restart, at random points.

After every step:
  - the server is up (health SERVING);
  - no node holds more than its allocatable (pods included), free >= 0;
  - every RUNNING gang holds its minimum (stale grace 0: a gang that
    cannot be made whole again is evicted in the same cycle);
  - queue and node sums equal the sums of the bindings;
  - no workload is RELEASING with nothing left to evict; PENDING holds
    nothing, PIPELINED holds nominations and no bindings;
  - a call that failed changed nothing (the full state is as before);
  - a retried request id gets the very same answer, and the same id with
    another request INVALID_ARGUMENT;
and after every restart the full state (GetClusterSnapshot, ListWorkloads,
ListQueues, GetPriorityClasses) equals the state before, field by field,
and WatchEvents resumes from the last revision.

    /usr/bin/python3 tests/integration/test_model.py \
        --server-binary build/server/gangsched --proto-dir proto

MODEL_SEEDS=3 MODEL_STEPS=300 are the CI defaults; a long run by hand:
MODEL_SEEDS=10 MODEL_STEPS=3000. MODEL_SEED=N replays one seed (its number
is printed with every failure, with the last operations).
"""

import argparse
import os
import random
import sys
import time
import unittest
from fractions import Fraction

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import test_e2e as e2e  # noqa: E402
from server_process import PersistentServer  # noqa: E402

GPU = e2e.GPU
T = 10.0
CONFIG_REFUSED_OK = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                     grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ALREADY_EXISTS,
                     grpc.StatusCode.OUT_OF_RANGE)

_UNITS = {"": 1, "m": Fraction(1, 1000), "k": 10**3, "M": 10**6, "G": 10**9,
          "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def exact(text):
    """A Kubernetes quantity as an exact fraction (sums must match exactly)."""
    if not text:
        return Fraction(0)
    i = len(text)
    while i > 0 and not (text[i - 1].isdigit() or text[i - 1] == "."):
        i -= 1
    return Fraction(text[:i]) * _UNITS[text[i:]]


def pb():
    return e2e.pb


def types():
    return e2e.types


def adm():
    return e2e.admin


class Model:
    """One seeded run: the server, the random choices, the checks."""

    CLASSES = [("train", 50, True), ("build", 100, False), ("inference", 125, False)]

    def __init__(self, seed, steps):
        self.seed = seed
        self.steps = steps
        self.rng = random.Random(seed)
        self.history = []
        self.with_batch_class = True
        # docs/SCHEDULING.md, "Preemption with notice": the train class's
        # notice in seconds (0: none), changed by reloads.
        self.train_notice = 0
        self.quotas = {"dept-a": 8, "dept-b": 4, "a1": 2, "a2": 2, "b1": 2}
        self.server = PersistentServer(
            e2e.SERVER_BINARY, self.config_text(),
            ("--stale-gang-grace-seconds", "0", "--tick-seconds", "1",
             "--watch-heartbeat-seconds", "0.2", "--max-queue-depth", "4"))
        self.answers = []  # (method, request, code, response bytes)
        self.restarts = 0
        self.notices = set()  # evictions seen with a notice (workload, evict_at)
        self.state = None
        self.leaves = ["a1", "a2", "b1"]
        self.extra_queues = {}  # admin-made leaves: name -> parent

    # --- setup and plumbing ----------------------------------------------

    def config_text(self):
        classes = list(self.CLASSES)
        if self.with_batch_class:
            classes.append(("batch", 60, True))
        lines = ["priority_classes:"]
        for name, value, preemptible in classes:
            notice = self.train_notice if name == "train" else 0
            lines.append("  - {name: %s, value: %d, preemptible: %s, "
                         "preemption_notice: %ds}"
                         % (name, value, "true" if preemptible else "false",
                            notice))
        lines += ["default_priority_class: train", "queues:"]
        for name, parent in (("dept-a", ""), ("dept-b", ""), ("a1", "dept-a"),
                             ("a2", "dept-a"), ("b1", "dept-b")):
            lines.append("  - {name: %s, parent: %s, resources: {nvidia.com/gpu: "
                         "{quota: %d, over_quota_weight: %d}}}"
                         % (name, '""' if not parent else parent, self.quotas[name],
                            1 + (len(name) % 3)))
        return "\n".join(lines) + "\n"

    def connect(self):
        self.sched = e2e.pbg.SchedulerStub(self.server.channel)
        self.admin = e2e.admin_g.AdminStub(self.server.channel)

    def fail(self, why):
        raise AssertionError("seed=%d: %s\nlast operations:\n  %s\nserver log tail:\n%s"
                             % (self.seed, why, "\n  ".join(self.history[-15:]),
                                self.server.output()[-3000:]))

    def call(self, method, request, stub=None):
        """Runs one RPC; returns (code, response or None)."""
        fn = getattr(stub or self.sched, method)
        try:
            return grpc.StatusCode.OK, fn(request, timeout=T)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL,
                            grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED,
                            grpc.StatusCode.DATA_LOSS):
                self.fail("%s answered %s: %s" % (method, e.code(), e.details()))
            return e.code(), None

    # --- the full state ----------------------------------------------------

    def read_state(self):
        """Everything a client can read, as comparable plain values."""
        snap = self.admin.GetClusterSnapshot(adm().GetClusterSnapshotRequest(), timeout=T)
        workloads = []
        token = ""
        while True:
            page = self.sched.ListWorkloads(pb().ListWorkloadsRequest(
                page_token=token, page_size=1000), timeout=T)
            workloads += list(page.workloads)
            token = page.next_page_token
            if not token:
                break
        queues = self.admin.ListQueues(adm().ListQueuesRequest(), timeout=T)
        classes = self.admin.GetPriorityClasses(adm().GetPriorityClassesRequest(),
                                                timeout=T)
        if snap.workloads_truncated:
            self.fail("a snapshot this small must not be truncated")
        return {
            "revision": snap.revision,
            "nodes": [n.SerializeToString(deterministic=True) for n in snap.nodes],
            "snapshot_queues": sorted(q.SerializeToString(deterministic=True)
                                      for q in snap.queues),
            "snapshot_workloads": [w.SerializeToString(deterministic=True)
                                   for w in snap.workloads],
            "workloads": [w.SerializeToString(deterministic=True) for w in workloads],
            "queues": [q.SerializeToString(deterministic=True) for q in queues.queues],
            "classes": classes.SerializeToString(deterministic=True),
            "_parsed": (snap, workloads, queues),
        }

    def settle(self):
        """The state once a cycle with no input changes nothing more.

        A cycle can change what the last one left without any request:
        a pending gang's reason is set before elastic growth in the same
        cycle takes room, and the next cycle words it from the state after
        the growth. Comparing only states that a cycle leaves alone keeps
        those apart from real changes. A cycle is run on demand (an empty
        UpsertNodes); a state that never settles is a failure of its own
        (it would mean the scheduler changes itself forever)."""
        state = self.read_state()
        for _ in range(10):
            code, _ = self.call("UpsertNodes", pb().UpsertNodesRequest())
            if code != grpc.StatusCode.OK:
                self.fail("an empty UpsertNodes answered %s" % code)
            again = self.read_state()
            if not self.diff(state, again):
                return again
            state = again
        self.fail("the state never settles: every cycle with no input changes it")

    @staticmethod
    def comparable(state):
        return {k: v for k, v in state.items() if not k.startswith("_")}

    def diff(self, before, after):
        a, b = self.comparable(before), self.comparable(after)
        for key in a:
            if a[key] != b[key]:
                if isinstance(a[key], list):
                    for i, (x, y) in enumerate(zip(a[key], b[key])):
                        if x != y:
                            return "%s[%d] differs:\nbefore: %r\nafter:  %r" % (key, i, x, y)
                    return "%s: %d entries before, %d after" % (key, len(a[key]), len(b[key]))
                return "%s differs: %r -> %r" % (key, a[key], b[key])
        return ""

    # --- invariants --------------------------------------------------------

    def check(self, state):
        snap, workloads, queues = state["_parsed"]
        T_ = types()
        # Nodes: nothing over allocatable, free >= 0, sums equal bindings.
        on_node = {n.node.name: {} for n in snap.nodes}
        by_queue = {}
        pods_by_node = {n.node.name: 0 for n in snap.nodes}
        for w in workloads:
            groups = {g.name: g for g in w.spec.groups}
            bound = {}
            for b in w.bindings:
                bound[b.group] = bound.get(b.group, 0) + 1
                if b.node not in on_node:
                    self.fail("%s is bound to unknown node %s" % (w.spec.id, b.node))
                pods_by_node[b.node] += 1
                for r, q in groups[b.group].resources.items():
                    on_node[b.node][r] = on_node[b.node].get(r, 0) + exact(q)
                    by_queue.setdefault(w.queue, {})
                    by_queue[w.queue][r] = by_queue[w.queue].get(r, 0) + exact(q)
            own = [e for e in w.evictions if e.workload_id == w.spec.id]
            # A notice comes only with preempt, reclaim and consolidate; a
            # workload is told once: all its notices have one deadline.
            deadlines = set()
            for e in own:
                if not e.HasField("evict_at"):
                    continue
                if e.reason not in ("preempt", "reclaim", "consolidate"):
                    self.fail("%s: a %s eviction with a notice" % (w.spec.id, e.reason))
                if e.noticed_time.ToNanoseconds() > e.evict_at.ToNanoseconds():
                    self.fail("%s: noticed after its evict_at" % w.spec.id)
                deadlines.add(e.evict_at.ToNanoseconds())
                self.notices.add((w.spec.id, e.evict_at.ToNanoseconds()))
            if len(deadlines) > 1:
                self.fail("%s told twice: evict_at %s" % (w.spec.id, sorted(deadlines)))
            if w.state == T_.WORKLOAD_STATE_RUNNING:
                for g in w.spec.groups:
                    if bound.get(g.name, 0) < g.min_count:
                        self.fail("%s RUNNING with %d of group %s, below its minimum %d"
                                  % (w.spec.id, bound.get(g.name, 0), g.name, g.min_count))
            elif w.state == T_.WORKLOAD_STATE_RELEASING:
                if not own:
                    self.fail("%s RELEASING with nothing left to evict" % w.spec.id)
            elif w.state == T_.WORKLOAD_STATE_PENDING:
                if w.bindings or w.nominated:
                    self.fail("%s PENDING but holds pods" % w.spec.id)
            elif w.state == T_.WORKLOAD_STATE_PIPELINED:
                if w.bindings or not w.nominated:
                    self.fail("%s PIPELINED with %d bound, %d nominated"
                              % (w.spec.id, len(w.bindings), len(w.nominated)))
            elif w.state == T_.WORKLOAD_STATE_RELEASED:
                if w.bindings:
                    self.fail("%s RELEASED but holds pods" % w.spec.id)
        for n in snap.nodes:
            name = n.node.name
            for r, q in n.node.allocatable.items():
                used = exact(n.allocated.get(r, "0"))
                if used > exact(q):
                    self.fail("node %s holds %s of %s, allocatable %s" % (name, used, r, q))
            for r, q in n.free.items():
                if exact(q) < 0:
                    self.fail("node %s shows free %s %s" % (name, r, q))
            for r, q in n.allocated.items():
                want = pods_by_node[name] if r == "pods" else on_node[name].get(r, 0)
                if exact(q) != want:
                    self.fail("node %s: allocated %s %s, bindings add up to %s"
                              % (name, r, q, want))
            for r, v in on_node[name].items():
                if v and exact(n.allocated.get(r, "0")) != v:
                    self.fail("node %s: %s of bindings not in allocated" % (name, r))
        # Queues: a leaf's allocated is its workloads' bindings; a parent's
        # is the sum of its children's.
        status = {q.queue.name: q for q in queues.queues}
        children = {}
        for q in queues.queues:
            children.setdefault(q.queue.parent, []).append(q.queue.name)

        def subtree_sum(name):
            total = dict(by_queue.get(name, {}))
            for c in children.get(name, []):
                for r, v in subtree_sum(c).items():
                    total[r] = total.get(r, 0) + v
            return total

        for name, q in status.items():
            want = subtree_sum(name)
            for r in set(want) | set(q.allocated):
                if exact(q.allocated.get(r, "0")) != want.get(r, 0):
                    self.fail("queue %s: allocated %s %s, bindings add up to %s"
                              % (name, r, q.allocated.get(r, "0"), want.get(r, 0)))

    # --- operations --------------------------------------------------------

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def random_spec(self, wid):
        h = self.pick([1, 1, 2])
        mn = h * self.rng.randrange(0, 3)
        desired = mn + h * self.rng.randrange(0, 3)
        groups = [e2e.group("head", {"cpu": "1"}, 1, 1)]
        groups.append(e2e.group("worker", {GPU: str(self.pick([1, 1, 2])), "cpu": "2"},
                                mn, desired, desired + h * self.rng.randrange(0, 2), h))
        if self.rng.random() < 0.3:
            groups.append(e2e.group("cpu", {"cpu": "4"}, 0, self.rng.randrange(0, 3)))
        classes = ["train", "train", "build", "inference"]
        if self.with_batch_class:
            classes.append("batch")
        return e2e.workload(wid, *groups, queue_name=self.pick(
            self.leaves + list(self.extra_queues)), priority_class=self.pick(classes))

    def workload_ids(self):
        _, workloads, _ = self.state["_parsed"]
        return {w.spec.id: w for w in workloads}

    def op(self, step):
        """One random operation; returns (description, code)."""
        r = self.rng.random()
        rid = "r%d-%d" % (self.seed, step) if self.rng.random() < 0.6 else ""
        known = self.workload_ids()
        if r < 0.22:  # allocate a new or a released id
            wid = "w%d" % self.rng.randrange(14)
            spec = self.random_spec(wid)
            if wid in known and known[wid].state != types().WORKLOAD_STATE_RELEASED \
                    and self.rng.random() < 0.5:
                # Resubmit with changes: desired count, class.
                spec = type(known[wid].spec)()
                spec.CopyFrom(known[wid].spec)
                g = spec.groups[1] if len(spec.groups) > 1 else spec.groups[0]
                h = max(g.pods_per_replica, 1)
                g.desired_count = min(g.max_count, g.min_count + h * self.rng.randrange(0, 3))
                if self.rng.random() < 0.3:
                    spec.priority_class = self.pick(["train", "build", "inference"])
            req = pb().AllocateRequest(request_id=rid, workload=spec)
            return self.mutate("Allocate", req, "allocate %s q=%s c=%s" % (
                wid, spec.queue, spec.priority_class))
        if r < 0.27:  # dry run: commits nothing
            req = pb().AllocateRequest(workload=self.random_spec("dry"), dry_run=True)
            code, _ = self.call("Allocate", req)
            return "dry-run", code, True
        if not known and r < 0.6:
            return self.node_op(rid)
        if r < 0.34 and known:  # release everything
            wid = self.pick(sorted(known))
            return self.mutate("Release", pb().ReleaseRequest(request_id=rid, workload_id=wid),
                               "release %s" % wid)
        if r < 0.40 and known:  # a pod failed, or a scale-down
            wid = self.pick(sorted(known))
            w = known[wid]
            if not w.bindings:
                return self.node_op(rid)
            b = self.pick(list(w.bindings))
            g = [x for x in w.spec.groups if x.name == b.group][0]
            h = max(g.pods_per_replica, 1)
            shrink = self.rng.random() < 0.4
            first = (b.index // h) * h if shrink else b.index
            slots = [types().SlotRef(group=b.group, index=i)
                     for i in range(first, first + (h if shrink else 1))]
            return self.mutate("Release", pb().ReleaseRequest(
                request_id=rid, workload_id=wid, slots=slots, shrink=shrink),
                "release %s %s/%d shrink=%s" % (wid, b.group, b.index, shrink))
        if r < 0.52 and known:  # the shim confirms an eviction
            with_evictions = [w for w in known.values()
                              if any(e.workload_id == w.spec.id for e in w.evictions)]
            if with_evictions:
                w = self.pick(with_evictions)
                e = [e for e in w.evictions if e.workload_id == w.spec.id][0]
                return self.mutate("Release", pb().ReleaseRequest(
                    request_id=rid, workload_id=w.spec.id, slots=list(e.slots)),
                    "confirm %s (%d slots)" % (w.spec.id, len(e.slots)))
        if r < 0.57 and known:  # preempt
            wid = self.pick(sorted(known))
            scope = self.pick([pb().PREEMPT_SCOPE_WHOLE, pb().PREEMPT_SCOPE_ELASTIC_ONLY])
            requeue = self.rng.random() < 0.5
            return self.mutate("Preempt", pb().PreemptRequest(
                request_id=rid, workload_id=wid, scope=scope, requeue=requeue),
                "preempt %s scope=%d requeue=%s" % (wid, scope, requeue))
        if r < 0.70:
            return self.node_op(rid)
        if r < 0.80:
            return self.queue_op(rid)
        if r < 0.85:
            return self.reload_op()
        if r < 0.93 and self.answers:  # retry an old request id
            method, req, code, resp = self.pick(self.answers)
            if self.rng.random() < 0.7:
                got_code, got = self.call(method, req, self.stub_for(method))
                got_bytes = (got.SerializeToString(deterministic=True)
                             if got is not None else None)
                if got_code != code or got_bytes != resp:
                    self.fail("retry of %s %s answered %s, first %s"
                              % (method, req.request_id, got_code, code))
                return "retry %s %s" % (method, req.request_id), got_code, True
            other = type(req)()
            other.CopyFrom(req)
            if method == "Allocate":
                other.workload.labels["changed"] = "yes"
            elif method == "Release":
                other.reason = "another"
            elif method == "Preempt":
                other.reason = "another"
            else:
                return "skip", grpc.StatusCode.OK, True
            got_code, _ = self.call(method, other, self.stub_for(method))
            if got_code != grpc.StatusCode.INVALID_ARGUMENT:
                self.fail("reused request id %s with another %s answered %s"
                          % (req.request_id, method, got_code))
            return "reuse %s %s" % (method, req.request_id), got_code, True
        return self.node_op(rid)

    def stub_for(self, method):
        return self.admin if method in ("UpsertQueue", "DeleteQueue") else self.sched

    def mutate(self, method, req, what):
        code, resp = self.call(method, req, self.stub_for(method))
        if req.request_id:
            self.answers.append((method, req, code,
                                 resp.SerializeToString(deterministic=True)
                                 if resp is not None else None))
        return what, code, False

    def node_op(self, rid):
        name = "n%d" % self.rng.randrange(6)
        r = self.rng.random()
        if r < 0.2:
            return self.mutate("RemoveNodes", pb().RemoveNodesRequest(
                request_id=rid, names=[name]), "remove %s" % name)
        node = e2e.node(name, self.pick([0, 2, 4, 4, 8]), cpu=str(self.pick([8, 16, 32])))
        if self.rng.random() < 0.25:
            node.allocatable["pods"] = str(self.pick([2, 4, 10]))
        if self.rng.random() < 0.15:
            node.schedulable = False
        if self.rng.random() < 0.05:
            node.allocatable["cpu"] = "-1"  # invalid: the whole request fails
        return self.mutate("UpsertNodes", pb().UpsertNodesRequest(
            request_id=rid, nodes=[node]),
            "upsert %s %s sched=%s" % (name, dict(node.allocatable), node.schedulable))

    def queue_op(self, rid):
        r = self.rng.random()
        name = "t%d" % self.rng.randrange(3)
        if r < 0.35 and name in self.extra_queues:
            req = adm().DeleteQueueRequest(request_id=rid, name=name)
            what, code, ok = self.mutate("DeleteQueue", req, "delete queue %s" % name)
            if code == grpc.StatusCode.OK:
                del self.extra_queues[name]
            return what, code, ok
        parent = self.pick(["", "dept-a", "dept-b", "a1"])  # a1 holds work: refused
        q = types().Queue(name=name, parent=parent)
        q.resources[GPU].quota = str(self.rng.randrange(3))
        if self.rng.random() < 0.3:
            q.preemption_notice.FromSeconds(self.rng.choice([1, 60]))
        if self.rng.random() < 0.3:
            q.resources[GPU].limit = str(self.rng.randrange(2, 6))
        req = adm().UpsertQueueRequest(request_id=rid, queue=q)
        what, code, ok = self.mutate("UpsertQueue", req, "queue %s under %r" % (name, parent))
        if code == grpc.StatusCode.OK:
            self.extra_queues[name] = parent
        return what, code, ok

    def reload_op(self):
        """Rewrites the config (a class toggled, quotas changed), SIGHUP."""
        before = (self.with_batch_class, dict(self.quotas), self.train_notice)
        if self.rng.random() < 0.5:
            self.with_batch_class = not self.with_batch_class
        if self.rng.random() < 0.5:
            self.train_notice = self.rng.choice([0, 30, 600])
        for q in self.quotas:
            if self.rng.random() < 0.3:
                self.quotas[q] = self.rng.randrange(0, 9)
        self.server.write_config(self.config_text())
        def answered(log):
            return log.count("config reloaded") + log.count("config not reloaded")

        log = self.server.output()
        done, refused_before = answered(log), log.count("config not reloaded")
        self.server.sighup()
        deadline = time.monotonic() + 10
        while answered(self.server.output()) == done:
            if time.monotonic() > deadline:
                self.fail("SIGHUP was never answered in the log")
            time.sleep(0.02)  # polling interval, bounded by the deadline
        refused = self.server.output().count("config not reloaded") > refused_before
        if refused:
            # What an operator does: put the file back; the old config is
            # still the one in effect, which a restart must find too.
            self.with_batch_class, self.quotas, self.train_notice = before
            self.server.write_config(self.config_text())
            return "reload refused", grpc.StatusCode.FAILED_PRECONDITION, False
        return "reload batch=%s quotas=%s notice=%ds" % (
            self.with_batch_class, self.quotas, self.train_notice), \
            grpc.StatusCode.OK, False

    def restart(self, kill):
        before = self.settle()
        (self.server.kill9 if kill else self.server.stop)()
        self.server.start()
        self.connect()
        after = self.read_state()
        why = self.diff(before, after)
        if why:
            self.fail("after %s the state differs: %s" % ("kill -9" if kill else "a stop", why))
        # WatchEvents resumes from the last revision: a heartbeat there,
        # and no event (nothing changed).
        call = self.sched.WatchEvents(pb().WatchRequest(from_revision=before["revision"]),
                                      timeout=3)
        stream = iter(call)
        try:
            first = next(stream)
            second = next(stream)
        except grpc.RpcError as e:
            self.fail("watch from the last revision %d: %s %s"
                      % (before["revision"], e.code(), e.details()))
        finally:
            call.cancel()
        for e in (first, second):
            if e.type != pb().EVENT_TYPE_HEARTBEAT or e.revision != before["revision"]:
                self.fail("after the restart the watch from %d sent %s at %d"
                          % (before["revision"], pb().EventType.Name(e.type), e.revision))
        # The event window is memory only: a watch resumed from before the
        # restart is told to resync (README, "Watching"), never sent a gap.
        if before["revision"] > 1:
            call = self.sched.WatchEvents(
                pb().WatchRequest(from_revision=before["revision"] - 1), timeout=3)
            try:
                e = next(iter(call))
                self.fail("a watch from %d, before the restart, sent %s at %d"
                          % (before["revision"] - 1, pb().EventType.Name(e.type), e.revision))
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.OUT_OF_RANGE:
                    self.fail("a watch from before the restart: %s %s" % (e.code(), e.details()))
            finally:
                call.cancel()
        self.state = after

    # --- the run -------------------------------------------------------------

    def run(self):
        self.server.start()
        self.connect()
        try:
            self.state = self.settle()
            self.check(self.state)
            for step in range(self.steps):
                if self.rng.random() < 0.06:
                    kill = self.rng.random() < 0.8
                    self.history.append("step %d: %s" % (step, "kill -9" if kill else "stop"))
                    self.restart(kill)
                    self.restarts += 1
                    continue
                what, code, read_only = self.op(step)
                self.history.append("step %d: %s -> %s" % (step, what, code.name))
                # self.state was settled: a failed call or a read must leave
                # it exactly as it was.
                state = self.read_state()
                if code != grpc.StatusCode.OK or read_only:
                    why = self.diff(self.state, state)
                    if why:
                        self.fail("%s (%s) changed the state: %s" % (what, code.name, why))
                self.check(state)
                self.state = self.settle()
                self.check(self.state)
        finally:
            self.server.cleanup()


class ModelTest(unittest.TestCase):
    def test_random_sequences_with_restarts(self):
        if os.environ.get("MODEL_SEED"):
            seeds = [int(os.environ["MODEL_SEED"])]
        else:
            seeds = list(range(1, 1 + int(os.environ.get("MODEL_SEEDS", "3"))))
        steps = int(os.environ.get("MODEL_STEPS", "300"))
        for seed in seeds:
            started = time.monotonic()
            model = Model(seed, steps)
            model.run()
            print("seed %d: %d steps, %d restarts, %d notices, in %.1f s"
                  % (seed, steps, model.restarts, len(model.notices),
                     time.monotonic() - started))


def setUpModule():
    e2e.setUpModule()


def tearDownModule():
    e2e.tearDownModule()


def main():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server-binary", default=e2e.SERVER_BINARY)
    parser.add_argument("--proto-dir", default=e2e.PROTO_DIR)
    args, rest = parser.parse_known_args()
    e2e.SERVER_BINARY = os.path.abspath(args.server_binary)
    e2e.PROTO_DIR = os.path.abspath(args.proto_dir)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
