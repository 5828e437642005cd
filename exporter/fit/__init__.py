"""The fit answers (SPEC section 7): would the kubelet admit this shape, where, and why not.

Shaped like the kubelet's resource managers, pure functions over a state rebuilt per refresh:

- ``pod``, ``fromspec``: who asks which manager for what (a shape, or a pod's context);
- ``nodestate``, ``snapshotstate``: the managers' state from the snapshot, the pod context
  and the kubelet's state files (``statefiles``);
- ``hints``, ``merge``, ``policy``, ``admission``: hint providers, the merger, the policies
  and scopes; ``allocate`` and ``cpuassign`` (the CPU manager's ``takeByTopology``): what each
  container gets; ``predicate``: the resource-fit predicate after the Topology Manager, and
  ``allocatable``: the Node's allocatable it compares with, when no Node object gives it;
- ``answers``, ``assumptions``: the per-shape answers and what they rest on;
- ``shapes``, ``kubeletconfig``: ``--fit-shapes``/``--shape`` and the kubelet's configuration;
- ``section``: :class:`FitView`, the fit section of /metrics, rejected pods judged once;
- ``explain``: ``snapshot --shape`` and ``--why`` in words and JSON.

The simulator may use these rules; this package never imports the simulator, kubeapi/,
refresh/ or web/ (tests/unit/test_layers.py).
"""
