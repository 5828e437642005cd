"""aiohttp's import-time client TLS contexts hold no CA bundle; everything else is as before
(exporter/web/clienttls.py). A fresh interpreter each: aiohttp must not be imported yet."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, os, ssl
import exporter.web.server
import aiohttp.connector
print(json.dumps({
    "aiohttp_verified": aiohttp.connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"],
    "later": ssl.create_default_context().cert_store_stats()["x509_ca"],
    "variable": os.environ.get("SSL_CERT_FILE"),
}))
"""


def probe(environment: dict[str, str]) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=environment,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def system_bundle_size() -> int:
    return ssl.create_default_context().cert_store_stats()["x509_ca"]


def test_the_import_time_contexts_hold_no_ca_and_the_variable_is_kept() -> None:
    bundle = ssl.get_default_verify_paths().cafile or os.environ.get("SSL_CERT_FILE")
    if not bundle or system_bundle_size() == 0:
        pytest.skip("this machine has no system CA bundle to leave out")
    without = {k: v for k, v in os.environ.items() if k != "SSL_CERT_FILE"}
    found = probe(without)
    assert found["aiohttp_verified"] == 0
    assert found["variable"] is None  # unset before, unset after
    assert found["later"] > 0  # a context built afterwards loads the system's bundle
    found = probe({**without, "SSL_CERT_FILE": bundle})
    assert found["variable"] == bundle
    assert found["aiohttp_verified"] == 0
    assert found["later"] > 0
