"""The kubelet's ``pkg/kubelet/cm/memorymanager``, mirrored."""
