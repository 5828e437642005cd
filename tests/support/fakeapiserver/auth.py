"""Who a request to the fake API server comes as, decided as the real server's authenticators do.

A bearer token is judged alone (an unknown token is refused even beside a good client
certificate); without one, a client certificate verified by the server's TLS context counts
when its common name is known; anything else is anonymous, admitted only when the server takes
no tokens at all. Kept apart from the HTTP plumbing so the rules read in one place, with the
TLS context that verifies the certificates they look at.
"""

from __future__ import annotations

import ssl
from collections.abc import Set
from pathlib import Path

from aiohttp import web

TOKEN = "fake-token"  # the token a server accepts by default (and its kubeconfig carries)


def request_identity(request: web.Request, tokens: Set[str] | None,
                     client_names: Set[str]) -> str | None:
    """``token:<token>``, ``cert:<common name>`` or ``anonymous``; None when refused.
    ``tokens`` None admits anonymous requests (and any bearer token)."""
    authorization = request.headers.get("Authorization", "")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        known = scheme == "Bearer" and (tokens is None or token in tokens)
        return f"token:{token}" if known else None
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    names = [value for rdn in (peer or {}).get("subject", ()) for key, value in rdn
             if key == "commonName"]
    if names and names[0] in client_names:
        return f"cert:{names[0]}"
    return "anonymous" if tokens is None else None


def tls_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """The server side of TLS; with ``client_ca``, client certificates are verified against
    it when presented (a client without one is then judged by its token)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context
