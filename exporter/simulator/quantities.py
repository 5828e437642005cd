"""A profile's quantities read as Kubernetes reads them (:func:`exporter.podspec.parse_quantity`):
bytes for memory, millicores for CPUs, whole ones only, and :class:`ProfileError` for what is
neither or for any other profile that cannot describe a node."""

from __future__ import annotations

from ..podspec import parse_quantity


class ProfileError(ValueError):
    """A profile that cannot describe a node."""


def _quantity(value: object, what: str, unit: float = 1) -> int:
    """A non-negative Kubernetes quantity (:func:`exporter.podspec.parse_quantity`) in ``unit``
    parts, whole ones only."""
    try:
        amount = parse_quantity(value) * unit
    except ValueError:
        amount = -1
    if isinstance(value, bool) or amount < 0 or abs(amount - round(amount)) > 1e-6:
        raise ProfileError(f"bad {what} quantity {value!r}")
    return round(amount)


def parse_bytes(value: int | str) -> int:
    """``"96Gi"`` -> bytes; plain integers are bytes already. A fraction of a byte (``500m``,
    ``1.0001Ki``) is refused."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _quantity(value, "memory")


def parse_cpus(value: int | str | None) -> tuple[int, bool]:
    """CPU request -> (whole CPUs, exclusive?). ``"1500m"`` and ``"1.5"`` are shared-pool,
    never exclusive."""
    whole = millis(value)
    return whole // 1000, whole > 0 and whole % 1000 == 0


def millis(value: int | str | None) -> int:
    """A CPU quantity (``2``, ``"1.5"``, ``"500m"``) in millicores; finer than a millicore is
    refused."""
    return 0 if value is None else _quantity(value, "CPU", 1000)


def hugepage_size_bytes(name: str) -> int:
    """``"2Mi"`` / ``"hugepages-2Mi"`` -> 2097152."""
    return parse_bytes(name.removeprefix("hugepages-"))
