"""The kubelet's ``pkg/kubelet/lifecycle``, mirrored."""
