"""The Kubernetes-API view (``--kube-api``): what the podresources socket cannot show.

The kubelet's podresources API sees only what its resource managers assign. Three things an
operator also needs are in the Kubernetes API instead: extended resources advertised by patching
the Node with no device plugin behind them (their use shows only in pod requests), stale
extended resources a departed device plugin left at capacity 0, and DRA capacity, which
ResourceSlices publish. Knowing the pods' phases also lets the refresh drop the assignments of
terminated pods that kubelets before 1.34 still list.

- ``records``: pure parsing of Node, Pod and ResourceSlice JSON into small records (the
  resource rules they apply are :mod:`exporter.podspec`'s);
- ``auth``: what a request authenticates with, and the configuration's two errors;
- ``config``: where the API server is and the credentials for it (in-cluster or kubeconfig);
- ``client``: list and watch requests over aiohttp;
- ``plugins``: credentials from exec plugins and auth providers, through the optional
  ``kubernetes`` package (imported only for a kubeconfig that needs it);
- ``resourceslices``: DRA devices' NUMA nodes, taints and pools from ResourceSlices and
  DeviceTaintRules;
- ``reflector``: the list/watch loop of one resource, a task on the event loop;
- ``view``: :class:`~exporter.kubeapi.view.KubeView`, the state those loops feed and its
  metric families.
"""
