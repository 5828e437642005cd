"""The kubelet's ``pkg/kubelet/cm/admission``, mirrored."""
