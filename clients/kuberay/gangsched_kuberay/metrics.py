"""The shim's Prometheus metrics (docs/OBSERVABILITY.md, "KubeRay shim"),
served on --metrics-listen."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

PODS_BOUND = Counter("gangsched_kuberay_pods_bound_total",
                     "Pods bound to a node through the Binding API.")
BIND_LATENCY = Histogram(
    "gangsched_kuberay_bind_latency_seconds",
    "From a pod's creation (as first seen by the shim) to its binding.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
             60, 300))
API_CALLS = Counter("gangsched_kuberay_api_calls_total",
                    "Kubernetes API calls that succeeded, by verb.",
                    ["verb", "resource"])
API_ERRORS = Counter("gangsched_kuberay_api_errors_total",
                     "Kubernetes API calls that failed, by verb.",
                     ["verb", "resource"])
GANGSCHED_CALLS = Counter("gangsched_kuberay_gangsched_calls_total",
                          "gangsched RPCs by method and result.",
                          ["method", "result"])
RESYNCS = Counter("gangsched_kuberay_resyncs_total",
                  "Full re-lists and resyncs, by cause.", ["reason"])
LEADER = Gauge("gangsched_kuberay_leader",
               "1 while this replica holds the lease and acts.")
EVICTIONS = Counter("gangsched_kuberay_evictions_total",
                    "Victim pods deleted for gangsched evictions.")
NOTICES = Counter("gangsched_kuberay_preemption_notices_total",
                  "Preemption notices shown: a RayCluster given a new "
                  "gangsched.io/evict-at and a PreemptionNotice Event.")
RELEASES = Counter("gangsched_kuberay_releases_total",
                   "Release calls, by kind.", ["kind"])
RECONCILE = Histogram("gangsched_kuberay_reconcile_seconds",
                      "One RayCluster's reconcile, gangsched calls included.",
                      buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                               0.25, 0.5, 1, 2.5))
