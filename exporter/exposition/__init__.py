"""From figures to /metrics bodies, every format and coding finished before a scrape asks.

- ``rendering``: the kubelet figures as metric families and text (:class:`Renderer`, per pod),
  and the helpers the optional sections use (``gauge_family``, ``render_text``);
- ``textformat``: the text format and OpenMetrics as ``prometheus_client`` writes them, for
  the sections a default run writes without importing it;
- ``health``: the exporter's own metrics (:class:`Health`), rendered from
  :mod:`exporter.kubelet.status`; ``instruments``: its counters and histograms; ``process``:
  the ``process_*`` figures;
- ``bodies``: :class:`Exposition`, the four /metrics variants assembled from sections,
  per-section gzip;
- ``sections``: :class:`Sections`, which sections are due again (fit answers, the
  Kubernetes-API view, health) and ``metrics_body()``.

Every metric's name, help and labels come from :mod:`exporter.catalog`. Never imports
refresh/ or web/ (tests/unit/test_layers.py).
"""
