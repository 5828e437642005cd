"""The node map as one HTML page: the SVG inline, no external asset, a few lines of script.

The page must work on an air-gapped node through ``kubectl port-forward``, so everything is in
the one response. The script only counts the snapshot's age up between reloads; the reload is
a ``<meta http-equiv="refresh">``, so the page stays current with scripts off too. The
Content-Security-Policy (:data:`CONTENT_SECURITY_POLICY`) allows that one script, by its hash,
and nothing from anywhere: a kubelet string that slipped through escaping could not run.
"""

from __future__ import annotations

import base64
import gzip
import hashlib

from .build import MapInputs, build_map
from .picture import NodeMap
from .svg import escape, render_svg

GZIP_LEVEL = 6
_AGE_SCRIPT = ("(function(){var e=document.getElementById('age');if(!e)return;"
               "var t=parseFloat(e.getAttribute('data-refreshed'));function f(){"
               "var s=Math.max(0,Math.round(Date.now()/1000-t));"
               "e.textContent=s<120?s+' s ago':Math.round(s/60)+' min ago';}"
               "f();setInterval(f,1000);})();")
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_AGE_SCRIPT.encode()).digest()).decode()
CONTENT_SECURITY_POLICY = (f"default-src 'none'; script-src 'sha256-{_SCRIPT_HASH}'; "
                           "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'")


def render_page(nodemap: NodeMap, reload_seconds: float | None = None,
                now: float | None = None) -> str:
    """The whole page; ``reload_seconds`` None for a file (``snapshot --format html``)."""
    reload = (f'<meta http-equiv="refresh" content="{max(1, round(reload_seconds))}">'
              if reload_seconds is not None else "")
    title = escape(f"NUMA map · {nodemap.node_name or 'node'}")
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><title>{title}</title>{reload}'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<style>body{margin:0;background:#f9fafb}svg.nodemap{display:block}</style>"
            f"</head><body>{render_svg(nodemap, now)}<script>{_AGE_SCRIPT}</script>"
            "</body></html>\n")


def render_document(nodemap: NodeMap, now: float | None = None) -> str:
    """The map as a standalone SVG file (``snapshot --format svg``)."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + render_svg(nodemap, now) + "\n"


def build_page(inputs: MapInputs, reload_seconds: float | None,
               now: float) -> tuple[bytes, bytes]:
    """One refresh's page, encoded, as is and gzipped (what the refresh loop hands the HTTP
    side: a large node's page is 1.5 MB, 80 KB gzipped)."""
    page = render_page(build_map(inputs), reload_seconds, now).encode()
    return page, gzip.compress(page, GZIP_LEVEL, mtime=0)
