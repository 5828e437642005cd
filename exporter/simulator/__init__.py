"""A kubelet podresources simulator: the real proto on a real unix socket, with fault switches.

Used by the tests, the ``demo`` and ``simulate`` commands, the benchmarks and the dashboard
checks. Every pod is admitted by the fit engine's rules (:mod:`exporter.fit.kubelet`, the model
the exporter's fit answers use; the simulator keeps none of its own).

- ``profile``: nodes as data (``profiles/*.json``): hardware, kubelet configuration, pods;
- ``quantities``: a profile's quantities (bytes, millicores) as Kubernetes reads them;
- ``cpulayout``: a profile's sockets, dies and L3 caches, as sysfs files and as the kubelet's
  CPU manager sees them;
- ``node/``: the simulated node and its kubelet: its book of pods, their admission and
  resources, its sysfs tree and state files, and the podresources gRPC server;
- ``podsapi/``: the kubelet's local Pods API, on a socket of its own;
- ``podobjects``: simulated pods as the Kubernetes API shows them (``v1.Pod`` JSON), which
  admission, the Pods API and the rejected-pod records read;
- ``control``: the HTTP control endpoint (fault switches, restarts, admission configuration,
  pods submitted at run time);
- ``run``: running it as a program (``simulate``), and the kubelet behind ``demo``.

The fake Kubernetes API server the tests use is not here: tests/support/fakeapiserver/.
"""

from .node.book import SimulatedNode
from .node.faults import Faults
from .node.server import Simulator
from .node.sysfs import write_sysfs
from .profile import PROFILE_NAMES, NodeSpec, ProfileError, load_profile, parse_profile

__all__ = ["PROFILE_NAMES", "Faults", "NodeSpec", "ProfileError", "SimulatedNode", "Simulator",
           "load_profile", "parse_profile", "write_sysfs"]
