"""The fit answers (SPEC section 7): would the kubelet admit this shape, where, and why not.

In three layers, each importing only those below it (tests/unit/test_layers.py):

- ``kubelet/``: the mirror of the kubelet's admission code, one module per upstream concept;
- ``state/``: what is kept between refreshes (the managers' state, the kubelet's checkpoint
  files, the Node's allocatable);
- the answers and their rendering, here:

- ``answers``: one shape's answers against one state (admitted, fits per NUMA node, free and
  shortfall, min NUMA nodes), and their words;
- ``capacity``: how many more pods of a shape the kubelet would admit;
- ``replay``: copies of a shape placed one after another on the NUMA nodes' free amounts, the
  same answer as placing them with the whole admission model, at the cost of counting;
  ``replay_counts``: what it works on, the free amounts and what each copy asks;
- ``assumptions``: what an answer assumes because the exporter cannot see it;
- ``kubeletconfig``: ``--kubelet-config`` and the Topology Manager flags, as ``Rules``;
- ``shapes``: ``--fit-shapes`` and ``snapshot --shape``;
- ``from_pod_object``: a pod object (a rejected pod, ``--why``) as a ``PodShape``;
- ``fitview``: :class:`FitView`, the fit section of /metrics, rejected pods judged once;
- ``explain``: ``snapshot --shape`` and ``--why`` in words and JSON.

The simulator admits by these rules; this package never imports the simulator, kubeapi/,
podsapi/, refresh/ or web/.
"""
