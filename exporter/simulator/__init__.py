"""A kubelet podresources simulator: the real proto on a real unix socket, with fault switches.

Used by the tests, the ``demo`` and ``simulate`` commands, the benchmarks and the dashboard
checks. ``profile`` describes nodes as data, ``state`` keeps a node's admitted pods (its
``allocator`` books what each holds, ``pods`` makes up new pods), ``server`` serves them over
gRPC (``wire`` shapes the replies, ``faults`` holds the switches and the rate limiter,
``checkpoints`` writes the kubelet's state files; ``podsapi`` serves the kubelet's local
Pods API on a socket of its own), ``sysfs`` writes the matching fake sysfs tree
and the kubelet config file, and ``control`` lets another process flip the fault switches,
change the admission configuration and submit pods over HTTP.

Every pod is admitted by the fit engine's rules (:mod:`exporter.fit`, the model the exporter's
fit answers use; the simulator keeps none of its own): ``admitting`` feeds it the simulator's
books and applies what it picks, under the configuration of ``admissionconfig``.
``apiserver`` is a small Kubernetes API server (list, watch and get) that the demo and the
tests point the exporter's Kubernetes-API view at: ``apistore`` holds its objects, versions and
open watches, ``apiauth`` decides who a request comes as, ``apiobjects`` builds the objects and
``apicluster`` shows a simulated node in it; ``podobjects`` writes simulated pods as the API
shows them (and as admission reads them).
"""

from .faults import Faults
from .profile import PROFILE_NAMES, NodeSpec, ProfileError, load_profile, parse_profile
from .server import Simulator
from .state import NodeState
from .sysfs import write_sysfs

__all__ = ["PROFILE_NAMES", "Faults", "NodeSpec", "NodeState", "ProfileError", "Simulator",
           "load_profile", "parse_profile", "write_sysfs"]
