"""The mirror of the kubelet's admission code (k8s.io/kubernetes v1.37.2, ``pkg/kubelet``).

One module per upstream concept, named after its Go file; the managers' packages as the
kubelet has them (``pkg/kubelet/cm/<manager>`` becomes ``<manager>/``). Imports nothing else
from ``exporter`` (tests/unit/test_layers.py).
"""
