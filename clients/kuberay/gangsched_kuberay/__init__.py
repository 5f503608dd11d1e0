"""gangsched-kuberay: the Kubernetes scheduler for the pods of RayClusters,
backed by gangsched's gang bindings (see clients/kuberay/README.md)."""
