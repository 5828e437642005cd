"""The kubelet's ``pkg/kubelet/cm/devicemanager``, mirrored."""
