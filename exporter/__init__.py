"""podresources-exporter: per-NUMA use of the kubelet's exclusive resources, as Prometheus
metrics."""

import os

__version__ = "0.1.0"

# gRPC's C core writes its own INFO lines to stderr (e.g. on every kubelet restart), which
# would break one-record-per-line logs; let it speak on errors only unless told otherwise.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

