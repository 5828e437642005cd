"""podresources-exporter: per-NUMA use of the kubelet's exclusive resources, as Prometheus
metrics.

The packages follow the data; each package's docstring maps its modules
(tests/unit/test_house.py holds every map to the tree, tests/unit/test_layers.py who may
import whom):

- ``kubelet/``: the podresources socket: calls, raw replies -> model data, capabilities;
- ``accounting/``: the counting rules of docs/metrics.md, pure;
- ``fit/``: where a pod shape fits, why a pod was rejected (SPEC section 7), with the mirror of
  the kubelet's admission code in ``fit/kubelet/``;
- ``exposition/``: figures -> metric families -> finished /metrics bodies;
- ``refresh/``: the loop: read, account, render, back off, watch the state files;
- ``web/``: HTTP endpoints, connections, TLS and basic auth;
- ``nodemap/``: the node map (``/numa``, ``snapshot --format svg|html``);
- ``podsapi/``: pod context from the kubelet's local Pods API;
- ``kubeapi/``: the optional Kubernetes-API view (``--kube-api``);
- ``commands/``: serve, snapshot, demo, simulate: what each builds and runs;
- ``simulator/``: the built-in kubelet simulator;
- ``_proto/``: the generated protobuf and gRPC code (never edited).

Top-level modules are the shared vocabulary and the command line:

- ``model``: plain data: what the kubelet reported, what sysfs says;
- ``issues``: every data-issue kind (one enum);
- ``catalog``: every metric's name, type, help and labels;
- ``podspec``: what admission counts in a pod spec (quantities, extended resources, effective
  and exclusive requests, rejections);
- ``podcontext``: what the kubelet knows of a pod that ``List`` does not carry (QoS, requests,
  phase), from a ``v1.Pod``;
- ``topology``: sysfs NUMA layout and SMT siblings;
- ``backoff``: back-off with jitter (the loop and the reflectors);
- ``files``: one file identity for every file re-read when it changes;
- ``cli``: every flag, its environment twin, dispatch to ``commands/``;
- ``logs``: the log formats;
- ``protogen``, ``protosubset``: the generator of ``_proto/`` and the cut of Kubernetes'
  ``generated.proto`` to the fields read.
"""

import os

__version__ = "0.1.0"

# gRPC's C core writes its own INFO lines to stderr (e.g. on every kubelet restart), which
# would break one-record-per-line logs; let it speak on errors only unless told otherwise.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

