"""Pod context from the kubelet's local Pods API (KEP-4188; ``docs/pods-api.md``).

The kubelet serves the pods it holds, status included, over gRPC on a socket of its own: no API
server, token or RBAC. Importing this package costs nothing; its modules load the gRPC client
and the compiled ``v1.Pod`` subset only when the Pods API is used.

- ``decode``: a pod's ``v1.Pod`` bytes as the Kubernetes API's JSON shows the fields read;
- ``client``: ``ListPods`` and the ``WatchPods`` stream;
- ``source``: :class:`~exporter.podsapi.source.PodsApi`, the node's pods kept current by the
  watch (a task on the event loop);
- ``sources``: :class:`~exporter.podsapi.sources.PodSources`, which source of pod context is in
  use (the Pods API, else the Kubernetes-API view, else none).
"""

# pkg/kubelet/kubelet_getters.go getPodsAPIDir: the root dir and kubeletconfig's
# DefaultKubeletPodsAPIDirName "pods-api"; pkg/kubelet/apis/pods/constants.go Socket
# "pods-api", and util.LocalEndpoint adds ".sock"
DEFAULT_SOCKET = "/var/lib/kubelet/pods-api/pods-api.sock"
