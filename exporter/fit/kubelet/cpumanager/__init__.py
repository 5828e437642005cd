"""The kubelet's ``pkg/kubelet/cm/cpumanager``, mirrored."""
