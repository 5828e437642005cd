"""Admission errors (``pkg/kubelet/cm/admission``, v1.37.2).

- ``errors``: what a manager's refusal carries (``Failure``: reason, resource, message).
"""
