"""aiohttp imported without loading the CA bundle for client contexts nobody here uses.

``aiohttp.connector`` builds two default client TLS contexts when it is imported, and the
verified one loads the system's CA bundle: 1.9 MiB of memory and some milliseconds at every
start. The exporter never uses them: its Kubernetes-API client builds its own context
(:func:`exporter.kubeapi.config.ssl_context`), and the HTTP server its own from the web config.
So aiohttp is imported with ``SSL_CERT_FILE`` naming no file, and the variable is restored
right after: those two contexts look certificates up in the system's certificate directory by
hash, if ever used, instead of holding the whole bundle, and every context built afterwards
loads the bundle as usual. Imported by :mod:`exporter.web` before anything else imports
aiohttp; without effect where aiohttp was imported before (tests, the simulator).
"""

from __future__ import annotations

import os
import sys

CA_FILE_VARIABLE = "SSL_CERT_FILE"
NO_FILE = "/nonexistent/podresources-exporter/no-ca-bundle-at-import"


def import_aiohttp() -> None:
    """Import aiohttp (once) with its default client contexts holding no CA bundle."""
    if "aiohttp" in sys.modules:
        return
    saved = os.environ.get(CA_FILE_VARIABLE)
    os.environ[CA_FILE_VARIABLE] = NO_FILE
    try:
        import aiohttp  # noqa: F401  (what this module is for)
    finally:
        if saved is None:
            os.environ.pop(CA_FILE_VARIABLE, None)
        else:
            os.environ[CA_FILE_VARIABLE] = saved


import_aiohttp()
