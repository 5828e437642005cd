"""Which sections of /metrics are due again, and the bodies a scrape picks from.

The data section comes from each successful refresh, the fit answers' section (SPEC section 7)
when its text changed, the Kubernetes-API view's section when the view, or the allocatable
resources it is rendered against, changed. The health section is due again after each refresh
attempt and rendered when a scrape asks for it. The view and the Pods API's state change
between refreshes, so a scrape checks them too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..accounting import Accounting
from ..kubelet.status import KubeletStatus
from ..model import Allocatable, KubeletSnapshot, Topology
from .bodies import Body, Exposition, Section
from .health import Health


class ViewSource(Protocol):
    """The Kubernetes-API view (:class:`exporter.kubeapi.view.KubeView`), as rendered here."""

    @property
    def version(self) -> int: ...

    def render(self, allocatable: Allocatable | None) -> bytes: ...


class FitSource(Protocol):
    """The fit answers (:class:`exporter.fit.fitview.FitView`): the same bytes object when
    nothing changed."""

    def update(self, snapshot: KubeletSnapshot, topology: Topology,
               accounting: Accounting) -> bytes: ...


class Sections:
    """The current exposition and the change checks that decide what to render again.

    ``allocatable``: the kubelet's allocatable resources as last read (the view's section
    depends on them).
    """

    def __init__(self, health: Health, status: KubeletStatus, view: ViewSource | None,
                 fit: FitSource | None, allocatable: Callable[[], Allocatable | None],
                 pods_source: Callable[[], tuple[str, str]] | None = None):
        self.health = health
        self.status = status
        self.view = view
        self.fit = fit
        # where pod context comes from, and the Pods API's state: it changes between
        # refreshes, so a scrape checks it too
        self._pods_source = pods_source
        self.exposition = Exposition(self._render_health)
        self._allocatable = allocatable
        self._view_key: tuple[int, Allocatable | None] | None = None
        self._fit_text = b""
        self.exposition.update(view=self._view_section())

    def metrics_body(self, openmetrics: bool, compressed: bool) -> Body:
        """The /metrics body: the data section as of the last successful refresh, the
        Kubernetes-API view's section as of now, the health section rendered at the first
        scrape after the last refresh attempt or change of the view, whichever came last."""
        if self._view_changed() or self._pods_source_changed():
            self.exposition.update(view=self._view_section())
            self.exposition.health_changed()
        return self.exposition.body(openmetrics, compressed)

    def body(self, openmetrics: bool, compressed: bool = False) -> bytes:
        """:meth:`metrics_body` in one piece."""
        return bytes(self.metrics_body(openmetrics, compressed))

    def update(self, data: Section | None, fit: Section | None) -> None:
        """After a refresh attempt: the sections given (None: unchanged), the view's; the
        health section is due again."""
        self.exposition.update(data=data, fit=fit, view=self._view_section())
        self.exposition.health_changed()

    def fit_section(self, snapshot: KubeletSnapshot | None, topology: Topology,
                    accounting: Accounting | None) -> Section | None:
        """The fit answers' section (SPEC section 7) when it changed, else None. Computed on
        the loop: it reads the Kubernetes-API view's rejected pods, which the loop owns."""
        if self.fit is None or snapshot is None or accounting is None:
            return None
        text = self.fit.update(snapshot, topology, accounting)
        if text is self._fit_text:
            return None
        self._fit_text = text
        return Section.of(text)

    def _render_health(self, openmetrics: bool) -> bytes:
        self._pods_source_changed()
        return self.health.render(openmetrics, self.status)

    def _pods_source_changed(self) -> bool:
        """Whether the pod context's source or the Pods API's state changed since the health
        section was last rendered (the health keeps the new value)."""
        if self._pods_source is None:
            return False
        current = self._pods_source()
        if current == self.health.pods_source:
            return False
        self.health.pods_source = current
        return True

    def _view_changed(self) -> bool:
        """Whether the view's section is due again: the view or the allocatable view it
        depends on changed since it was last taken."""
        view, taken = self.view, self._view_key
        return view is not None and (taken is None or taken[0] != view.version
                                     or taken[1] is not self._allocatable())

    def _view_section(self) -> Section | None:
        """The view's section when it changed since the last one taken, else None."""
        view = self.view
        if view is None or not self._view_changed():
            return None
        allocatable = self._allocatable()
        self._view_key = (view.version, allocatable)
        return Section.of(view.render(allocatable))
