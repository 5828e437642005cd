"""Admission errors (``cm/admission/errors.go``, v1.37.2): what a manager's refusal carries.

A :class:`Failure` is the reason the kubelet gives the pod (``Error.Type()``: e.g.
``UnexpectedAdmissionError``, ``SMTAlignmentError``, ``OutOfcpu``), the resource it concerns,
and the message.
"""

from __future__ import annotations

from dataclasses import dataclass

UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
# not a reason the kubelet gives: it never finishes admitting the pod (a manager's loop that
# does not end, cpumanager/cpu_assignment.go takeByTopologyNUMADistributed before the fix of
# kubernetes#140730); the pod stays Pending and the kubelet's pod admission is blocked
ADMISSION_STALLED = "AdmissionStalled"


@dataclass(frozen=True)
class Failure:
    """An allocation the kubelet would refuse: the admission reason, the resource, why."""

    reason: str
    resource: str
    message: str
