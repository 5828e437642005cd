"""podresources-exporter: per-NUMA use of the kubelet's exclusive resources, as Prometheus metrics."""

__version__ = "0.1.0"
