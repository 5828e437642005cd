"""The mirror of the kubelet's admission code: k8s.io/kubernetes v1.37.2, ``pkg/kubelet``.

One module per upstream concept, named after the Go file it follows, so that a reader holding
an upstream file opens its counterpart in one step: ``pkg/kubelet/cm/<manager>/<file>.go`` is
``<manager>/<file>.py`` here (the ``cm/`` level is left out), ``pkg/kubelet/<pkg>/<file>.go``
is ``<pkg>/<file>.py``. Pure functions and frozen data; it imports nothing else of the
exporter's but ``podspec`` (tests/unit/test_layers.py), so it can be read against the Go alone.

- ``topologymanager/``: hints, the merger, the four policies and the scopes;
- ``cpumanager/``, ``memorymanager/``, ``devicemanager/``: each manager's hints, ``Allocate``
  and state;
- ``lifecycle/``: the resource-fit predicate;
- ``allocation/``: the admission of one pod (the admit handlers in order);
- ``admission/``: the errors a refusal carries;
- ``config``: the kubelet configuration admission depends on (``Rules``, ``Managers``);
- ``podshape``: a pod as admission sees it, and what it asks each manager for;
- ``managers_state``: what the managers hold when a pod arrives (``ManagersState``).
"""
