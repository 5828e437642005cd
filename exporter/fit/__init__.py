"""The fit answers (SPEC section 7): where a pod shape fits, and why a pod was rejected.

- ``engine``: pure: free capacity per NUMA node, a shape's fit, shortfall, capacity and the
  smallest NUMA set, as the kubelet's Topology Manager would decide;
- ``shapes``: ``--fit-shapes`` files and ``--shape`` arguments, re-read when changed;
- ``kubeletconfig``: ``--kubelet-config``, the kubelet's policies the answers follow;
- ``section``: :class:`FitView`, the section of /metrics after each refresh, and rejected pods
  judged once;
- ``explain``: ``snapshot --shape`` and ``--why`` in words and JSON.

The simulator's admission is an independent implementation of the same rules: neither imports
the other. Never imports kubeapi/, refresh/ or web/ (tests/unit/test_layers.py).
"""
