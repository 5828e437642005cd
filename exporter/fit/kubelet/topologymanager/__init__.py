"""The kubelet's ``pkg/kubelet/cm/topologymanager``, mirrored."""
