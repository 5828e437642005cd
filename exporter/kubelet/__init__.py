"""The kubelet's podresources socket: calls, raw replies, plain data, and what it supports.

- ``client``: :class:`KubeletClient`, the gRPC calls (``List``, ``GetAllocatableResources``,
  ``Get``, v1alpha1 ``List``) returning raw bytes; error kinds and ``describe(error)``, the one
  sentence the loop's log and ``snapshot`` both print;
- ``decode``: raw replies -> :mod:`exporter.model` data (``ListDecoder``, ``AllocatableDecoder``),
  cut into pods before anything is decoded, reusing pods that did not change;
- ``convert``: decoded protobuf messages -> plain data; the capped conversion leaves parts of
  absurd size out;
- ``limits``: the limits on absurd replies and the checks whether a pod or reply passes one;
- ``reader``: :class:`KubeletReader`, which calls one refresh makes (v1 or v1alpha1, the ``Get``
  probe, when to re-read allocatable resources, a restarted kubelet);
- ``status``: what was found out (up, back-off, capabilities), plain data the health section
  renders.

Imports nothing of exposition/, refresh/, web/, fit/ or kubeapi/ (tests/unit/test_layers.py).
"""
