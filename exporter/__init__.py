"""podresources-exporter: per-NUMA use of the kubelet's exclusive resources, as Prometheus
metrics."""

import os
import sys

__version__ = "0.1.0"

# gRPC's C core writes its own INFO lines to stderr (e.g. on every kubelet restart), which
# would break one-record-per-line logs; let it speak on errors only unless told otherwise.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def _import_aiohttp_without_its_default_tls_contexts() -> None:
    """Import aiohttp with its CA bundle left unread.

    When imported, aiohttp builds two default TLS client contexts, each loading the system's
    whole CA bundle: about 2 MiB of memory for the life of the process, on every node. The
    exporter never uses them: it serves plain HTTP or TLS with the web configuration's own
    context, and the Kubernetes-API view connects with a context of its own (the cluster's CA,
    or the system's loaded when a kubeconfig asks for it). So while aiohttp is imported,
    ``SSL_CERT_FILE`` (read by OpenSSL when a default context is built) names an empty file.
    """
    if "aiohttp" in sys.modules:
        return
    saved = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = os.devnull
    try:
        import aiohttp  # noqa: F401  (imported here for the side effect above)
    finally:
        if saved is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = saved


_import_aiohttp_without_its_default_tls_contexts()
