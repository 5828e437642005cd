"""HTTP: /metrics, /healthz, /readyz, /numa (the node map) and the landing page.

- ``server``: the endpoints; they serve a ``MetricsSource`` (the refresh loop), never the
  kubelet; ``/numa`` is the page the source builds (:mod:`exporter.nodemap`);
- ``negotiation``: the format (text or OpenMetrics) and coding (gzip) a request accepts;
- ``listener``: the connections: cap, timeouts, slow readers, TLS handshakes;
- ``webconfig``: ``--web-config-file`` (TLS, client certificates, users), re-read when changed;
- ``basicauth``: bcrypt checks at a bounded cost;
- ``clienttls``: aiohttp imported without loading the CA bundle for its client's default TLS
  contexts, which nothing here uses (imported first, below).

Nothing here is imported eagerly that plain HTTP does not need: ``webconfig`` (YAML, bcrypt)
is imported only for a web config. Never imports refresh/ (tests/unit/test_layers.py).
"""

from . import clienttls  # noqa: F401  (before anything imports aiohttp)
