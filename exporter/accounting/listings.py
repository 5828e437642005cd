"""A pod the kubelet lists more than once, merged into one listing.

A reply that names the same pod twice is inconsistent data (``duplicate_entry`` in
docs/metrics.md): the ledger counts such a pod once, from the union of its listings, and counts
the repeat as a data issue. Kept apart from the ledger: it is a rule about the kubelet's data,
not about the node's totals.
"""

from __future__ import annotations

from typing import TypeVar

from ..model import ContainerAssignment, PodAssignment

T = TypeVar("T")


def merge_listings(parts: list[PodAssignment]) -> PodAssignment:
    """One pod from several listings of it: what a later listing repeats is not added again.

    Linear in the listings' size: a pod listed many times must not make a refresh quadratic.
    """
    by_name: dict[str, list[ContainerAssignment]] = {}
    for part in parts:
        for container in part.containers:
            by_name.setdefault(container.name, []).append(container)
    containers = tuple(
        listed[0] if len(listed) == 1 else ContainerAssignment(
            name,
            _extend([c.cpu_ids for c in listed]),
            _extend([c.memory for c in listed]),
            _extend([c.devices for c in listed]),
            _extend([c.dra_devices for c in listed]))
        for name, listed in by_name.items())
    first = parts[0]
    return PodAssignment(first.namespace, first.name, containers,
                         _extend([part.cpu_ids for part in parts]),
                         _extend([part.memory for part in parts]),
                         _extend([part.oversized for part in parts]))


def _extend(listings: list[tuple[T, ...]]) -> tuple[T, ...]:
    """The first listing, then what each later one adds that no earlier one had (repeats
    within one listing are kept: the figures count them as duplicated entries)."""
    items = list(listings[0])
    known = set(items)
    for listing in listings[1:]:
        added = [item for item in listing if item not in known]
        items.extend(added)
        known.update(added)
    return tuple(items)
