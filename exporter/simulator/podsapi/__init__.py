"""The simulated kubelet's local Pods API (``v1alpha1.Pods``), on a socket of its own.

- ``server``: :class:`PodsApiServer`, ``ListPods``/``WatchPods``/``GetPod`` as v1.37 serves them;
- ``messages``: pods as ``v1.Pod`` protobuf messages, as the kubelet writes them.
"""
