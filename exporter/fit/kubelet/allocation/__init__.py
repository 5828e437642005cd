"""The kubelet's ``pkg/kubelet/allocation``, mirrored: the admission of one pod."""
