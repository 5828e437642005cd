"""podresources-exporter: per-NUMA use of the kubelet's exclusive resources, as Prometheus
metrics.

The packages follow the data (README "Development" has the full map):

    kubelet/      the podresources socket: calls, raw replies -> model data, capabilities
    accounting/   the counting rules of docs/metrics.md, pure
    fit/          where a pod shape fits, why a pod was rejected (SPEC section 7)
    exposition/   figures -> metric families -> finished /metrics bodies
    refresh/      the loop: read, account, render, back off, watch the state files
    web/          HTTP endpoints, connections, TLS and basic auth
    kubeapi/      the optional Kubernetes-API view (--kube-api)
    commands/     serve, snapshot, demo, simulate: what each builds and runs
    simulator/    the built-in kubelet simulator
Top-level modules are the shared vocabulary: model, issues, catalog (every metric), podspec
(what admission counts in a pod spec), topology (sysfs), backoff; and cli, logs, protogen.
"""

import os

__version__ = "0.1.0"

# gRPC's C core writes its own INFO lines to stderr (e.g. on every kubelet restart), which
# would break one-record-per-line logs; let it speak on errors only unless told otherwise.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

