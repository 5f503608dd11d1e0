"""Every label, annotation and name the shim reads or writes, in one place
(the README's "Run with KubeRay" lists them for users)."""

# What users set on a RayCluster / RayJob / RayService.
QUEUE_LABEL = "gangsched.io/queue"
KAI_QUEUE_LABEL = "kai.scheduler/queue"  # read when moving from KAI
PRIORITY_LABEL = "ray.io/priority-class-name"
PLACEMENT_ANNOTATION = "gangsched.io/placement"
TOPOLOGY_ANNOTATION = "gangsched.io/topology-key"
TOPOLOGY_REQUIRED_ANNOTATION = "gangsched.io/topology-required"
EVICT_ANNOTATION = "gangsched.io/on-eviction"  # "suspend" on a RayJob
# Multi-level topologies (docs/SCHEDULING.md, "Topologies"): on a RayCluster,
# KAI's names or gangsched's; on a group's pod template, gangsched's, with
# the segments.
KAI_TOPOLOGY_ANNOTATIONS = ("kai.scheduler/topology",
                            "kai.scheduler/topology-required-placement",
                            "kai.scheduler/topology-preferred-placement")
TOPOLOGY_ANNOTATIONS = ("gangsched.io/topology",
                        "gangsched.io/topology-required-placement",
                        "gangsched.io/topology-preferred-placement")
SEGMENT_SIZE_ANNOTATION = "gangsched.io/topology-segment-size"
SEGMENT_LEVEL_ANNOTATION = "gangsched.io/topology-segment-placement"
# On a group's pod template: a fraction of one GPU per pod (KAI's name,
# then gangsched's own).
GPU_FRACTION_ANNOTATIONS = ("gpu-fraction", "gangsched.io/gpu-fraction")
# GPU memory per pod: KAI's annotation, a number of MiB ("2000"), or
# gangsched's own, a quantity ("20Gi").
KAI_GPU_MEMORY_ANNOTATION = "gpu-memory"
GPU_MEMORY_ANNOTATION = "gangsched.io/gpu-memory"
# On a node: the memory of one GPU device in MiB, as NVIDIA's GPU feature
# discovery labels it.
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"

# What the shim writes.
SLOT_ANNOTATION = "gangsched.io/slot"  # "group/index", set when bound
WORKLOAD_ANNOTATION = "gangsched.io/workload"
GRANTABLE_ANNOTATION = "gangsched.io/grantable"  # scale_hints as JSON
GPU_DEVICES_ANNOTATION = "gangsched.io/gpu-devices"  # "0" or "2,3"
# Preemption with notice (docs/SCHEDULING.md, "Preemption with notice"):
# when the pods gangsched evicts are deleted, RFC 3339 UTC
# ("2026-12-07T09:15:00Z"), on the victim pods, their RayCluster and its
# RayJob while the notice runs.
EVICT_AT_ANNOTATION = "gangsched.io/evict-at"
COMPONENT = "gangsched-kuberay"

# KubeRay's labels on the pods it creates.
CLUSTER_LABEL = "ray.io/cluster"
GROUP_LABEL = "ray.io/group"
NODE_TYPE_LABEL = "ray.io/node-type"
HEAD_GROUP_LABEL_VALUE = "headgroup"
REPLICA_NAME_LABEL = "ray.io/worker-group-replica-name"
REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"
HOST_INDEX_LABEL = "ray.io/replica-host-index"

# Labels of the workloads the shim submits: what marks a workload as a
# RayCluster's (the shim never releases a workload without them).
NAMESPACE_LABEL = "kubernetes.io/namespace"

# The gangsched group of a RayCluster's head.
HEAD_GROUP = "head"

RAY_GROUP = "ray.io"
RAY_VERSION = "v1"
