"""The Kubernetes-API view's configuration without a server: kubeconfig files as kubectl reads
them, the in-cluster service account, and credentials from the optional kubernetes package
(exporter/kubeapi/config.py, exporter/kubeapi/plugins.py)."""

from __future__ import annotations

import base64
import json
import ssl
import sys
import time
from pathlib import Path

import pytest

import exporter.kubeapi
from exporter.kubeapi import config
from exporter.kubeapi.auth import Auth, ConfigError, CredentialsError
from exporter.kubeapi.config import from_kubeconfig, in_cluster, load_config, ssl_context

from ..integration.test_webconfig import CA

SERVER = "https://api.example.com:6443"


def kubeconfig(path: Path, user: dict | None = None, cluster: dict | None = None,
               **document) -> Path:
    """A one-context kubeconfig (JSON is YAML) at ``path``."""
    body = {"apiVersion": "v1", "kind": "Config", "current-context": "work",
            "clusters": [{"name": "c", "cluster": {"server": SERVER, **(cluster or {})}}],
            "users": [{"name": "u", "user": user or {}}],
            "contexts": [{"name": "work", "context": {"cluster": "c", "user": "u"}}]}
    body.update(document)
    path.write_text(json.dumps(body))
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def auth_of(path: Path) -> Auth:
    return await from_kubeconfig(str(path)).credentials.current()


@pytest.fixture
def pki(tmp_path):
    ca = CA(tmp_path, "ca")
    cert, key = ca.issue("exporter", client=True)
    return ca, cert, key


# ---- kubeconfig ---------------------------------------------------------------------------

async def test_a_token_user(tmp_path):
    path = kubeconfig(tmp_path / "config", {"token": "abc.def"})
    loaded = from_kubeconfig(str(path))
    assert loaded.server == SERVER
    assert loaded.origin == f"kubeconfig {path}, context work"
    assert loaded.ca is None and not loaded.insecure and loaded.headers == ()
    assert await loaded.credentials.current() == Auth("Bearer abc.def")


async def test_a_token_file_is_read_for_every_request(tmp_path):
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token").write_text("first\n")
    # relative to the kubeconfig's directory, and winning over an inline token (client-go)
    path = kubeconfig(tmp_path / "config", {"tokenFile": "secrets/token", "token": "inline"})
    credentials = from_kubeconfig(str(path)).credentials
    assert await credentials.current() == Auth("Bearer first")
    (tmp_path / "secrets" / "token").write_text("second")
    assert await credentials.current() == Auth("Bearer second")
    (tmp_path / "secrets" / "token").unlink()
    with pytest.raises(CredentialsError, match=r"cannot read the token file .*secrets/token: "
                                               r"No such file or directory"):
        await credentials.current()


async def test_basic_auth(tmp_path):
    path = kubeconfig(tmp_path / "config", {"username": "admin", "password": "s3cret"})
    assert await auth_of(path) == Auth("Basic " + b64(b"admin:s3cret"))


@pytest.mark.parametrize("as_data", [True, False], ids=["data", "files"])
async def test_a_client_certificate_user(tmp_path, pki, as_data):
    ca, cert, key = pki
    if as_data:
        user = {"client-certificate-data": b64(cert.read_bytes()),
                "client-key-data": b64(key.read_bytes())}
        cluster = {"certificate-authority-data": b64(ca.path.read_bytes())}
    else:  # paths relative to the kubeconfig's directory
        user = {"client-certificate": cert.name, "client-key": key.name}
        cluster = {"certificate-authority": ca.path.name}
    loaded = from_kubeconfig(str(kubeconfig(tmp_path / "config", user, cluster)))
    auth = await loaded.credentials.current()
    assert auth == Auth(None, cert.read_bytes(), key.read_bytes())
    assert loaded.ca is not None and loaded.ca.read() == ca.path.read_bytes()
    context = ssl_context(loaded, auth)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    # only the configured CA is trusted, not the system's store
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "ca"),),)]


def test_a_certificate_without_its_key(tmp_path, pki):
    _, cert, _ = pki
    path = kubeconfig(tmp_path / "config", {"client-certificate": str(cert)})
    with pytest.raises(ConfigError, match="client-certificate and client-key go together"):
        from_kubeconfig(str(path))


def test_a_key_that_is_not_the_certificates(tmp_path, pki):
    ca, cert, _ = pki
    _, other_key = ca.issue("someone-else", client=True)
    path = kubeconfig(tmp_path / "config", {"client-certificate": str(cert),
                                            "client-key": str(other_key)})
    with pytest.raises(ConfigError, match=r"the client certificate and key cannot be used "
                                          r"\(KEY_VALUES_MISMATCH\)"):
        from_kubeconfig(str(path))


def test_missing_files_stop_the_start(tmp_path):
    path = kubeconfig(tmp_path / "config", {"token": "t"},
                      {"certificate-authority": "no-such-ca.crt"})
    with pytest.raises(ConfigError) as caught:
        from_kubeconfig(str(path))
    assert str(caught.value) == (f"kubeconfig {path}, context work: cannot read the "
                                 f"certificate-authority {tmp_path / 'no-such-ca.crt'}: "
                                 "No such file or directory")


def test_a_ca_file_without_certificates(tmp_path):
    (tmp_path / "ca.crt").write_text("not a certificate\n")
    path = kubeconfig(tmp_path / "config", {}, {"certificate-authority": "ca.crt"})
    with pytest.raises(ConfigError, match="the certificate-authority holds no usable "
                                          "certificate"):
        from_kubeconfig(str(path))


async def test_insecure_skip_tls_verify(tmp_path):
    path = kubeconfig(tmp_path / "config", {"token": "t"}, {"insecure-skip-tls-verify": True})
    loaded = from_kubeconfig(str(path))
    context = ssl_context(loaded, await loaded.credentials.current())
    assert loaded.insecure
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname


def test_insecure_with_a_ca_is_refused_as_kubectl_does(tmp_path, pki):
    ca, _, _ = pki
    path = kubeconfig(tmp_path / "config", {}, {"insecure-skip-tls-verify": True,
                                                "certificate-authority": str(ca.path)})
    with pytest.raises(ConfigError, match="specifying a root certificates file with the "
                                          "insecure flag is not allowed"):
        from_kubeconfig(str(path))


def test_server_name_proxy_and_impersonation(tmp_path):
    path = kubeconfig(tmp_path / "config",
                      {"token": "t", "as": "jane", "as-groups": ["ops", "audit"],
                       "as-user-extra": {"reason/why": ["debug"]}},
                      {"tls-server-name": "kubernetes.default.svc",
                       "proxy-url": "http://proxy.example.com:3128"})
    loaded = from_kubeconfig(str(path))
    assert loaded.tls_server_name == "kubernetes.default.svc"
    assert loaded.proxy == "http://proxy.example.com:3128"
    assert loaded.headers == (("Impersonate-User", "jane"), ("Impersonate-Group", "ops"),
                              ("Impersonate-Group", "audit"),
                              ("Impersonate-Extra-reason%2Fwhy", "debug"))


def test_a_server_path_prefix_is_kept(tmp_path):
    path = kubeconfig(tmp_path / "config", {}, {"server": "https://rancher.example.com/k8s/"
                                                          "clusters/c-m-1/"})
    assert from_kubeconfig(str(path)).server == "https://rancher.example.com/k8s/clusters/c-m-1"


async def test_kubeconfig_files_merge_as_kubectl_merges_them(tmp_path):
    first = tmp_path / "first"
    first.write_text(json.dumps({
        "current-context": "prod",
        "users": [{"name": "u", "user": {"token": "first"}}],
        "contexts": [{"name": "prod", "context": {"cluster": "p", "user": "u"}}]}))
    second = kubeconfig(tmp_path / "second", {"token": "second"},
                        clusters=[{"name": "p", "cluster": {"server": "https://prod:6443"}}],
                        contexts=[{"name": "prod", "context": {"cluster": "other"}}])
    # the first file to set current-context or to name an entry wins; a missing file is skipped
    loaded = from_kubeconfig(f"{first}:{tmp_path / 'missing'}:{second}")
    assert loaded.server == "https://prod:6443"
    assert await loaded.credentials.current() == Auth("Bearer first")
    assert loaded.origin == f"kubeconfig {first}, {second}, context prod"


@pytest.mark.parametrize("document, message", [
    ({"current-context": ""}, "no current-context is set"),
    ({"current-context": "gone"}, "the current context 'gone' is not defined"),
    ({"contexts": [{"name": "work", "context": {"cluster": "nope", "user": "u"}}]},
     "context 'work': cluster 'nope' is not defined"),
    ({"contexts": [{"name": "work", "context": {"cluster": "c", "user": "nobody"}}]},
     "context 'work': user 'nobody' is not defined"),
    ({"clusters": [{"name": "c", "cluster": {"server": "api.example.com:6443"}}]},
     "the cluster's server 'api.example.com:6443' is not an http(s) URL"),
    ({"clusters": [{"name": "c", "cluster": {"server": SERVER,
                                             "certificate-authority-data": "%%%"}}]},
     "certificate-authority-data is not valid base64"),
    ({"clusters": [{"name": "c", "cluster": {"server": SERVER,
                                             "proxy-url": "socks5://proxy:1080"}}]},
     "proxy-url 'socks5://proxy:1080': only http:// and https:// proxies are supported"),
])
def test_unusable_kubeconfigs(tmp_path, document, message):
    path = kubeconfig(tmp_path / "config", **document)
    with pytest.raises(ConfigError) as caught:
        from_kubeconfig(str(path))
    assert str(caught.value) == f"kubeconfig {path}: {message}"


def test_a_kubeconfig_that_is_not_yaml_or_not_there(tmp_path):
    (tmp_path / "config").write_text("clusters: [unclosed\n")
    with pytest.raises(ConfigError, match=r"^kubeconfig .*/config: not valid YAML \("):
        from_kubeconfig(str(tmp_path / "config"))
    with pytest.raises(ConfigError, match=r"^no Kubernetes API configuration: no file named "
                                          r"by \$KUBECONFIG exists \(.*/nothing\)$"):
        from_kubeconfig(str(tmp_path / "nothing"))


# ---- in-cluster ---------------------------------------------------------------------------

@pytest.fixture
def service_account(tmp_path, pki):
    ca, _, _ = pki
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text("sa-token-1")
    (directory / "ca.crt").write_bytes(ca.path.read_bytes())
    return directory


@pytest.mark.parametrize("host, server", [
    ("10.96.0.1", "https://10.96.0.1:443"),
    ("fd00:10:96::1", "https://[fd00:10:96::1]:443"),
    ("[fd00:10:96::1]", "https://[fd00:10:96::1]:443"),
])
async def test_in_cluster(service_account, host, server):
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    loaded = in_cluster(environ, service_account)
    assert loaded.server == server and loaded.origin == "in-cluster service account"
    assert loaded.ca is not None and loaded.ca.path == service_account / "ca.crt"
    assert await loaded.credentials.current() == Auth("Bearer sa-token-1")
    (service_account / "token").write_text("sa-token-2\n")  # the kubelet renewed it
    assert await loaded.credentials.current() == Auth("Bearer sa-token-2")


def test_in_cluster_is_used_without_kubeconfig(service_account, monkeypatch):
    monkeypatch.setattr(config, "SERVICE_ACCOUNT_DIR", service_account)
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert load_config(environ).origin == "in-cluster service account"
    assert load_config({**environ, "KUBECONFIG": str(kubeconfig(
        service_account / "kubeconfig", {"token": "t"}))}).server == SERVER


@pytest.mark.parametrize("missing, message", [
    ("token", "cannot read the token file {dir}/token: No such file or directory"),
    ("ca.crt", "cannot read the service account CA {dir}/ca.crt: No such file or directory"),
])
def test_in_cluster_without_its_files(service_account, missing, message):
    (service_account / missing).unlink()
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ConfigError) as caught:
        in_cluster(environ, service_account)
    assert str(caught.value) == "in-cluster service account: " + message.format(
        dir=service_account)


def test_outside_a_cluster_without_kubeconfig():
    with pytest.raises(ConfigError) as caught:
        load_config({"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert str(caught.value) == (
        "no Kubernetes API configuration: not running in a pod (KUBERNETES_SERVICE_HOST and "
        "KUBERNETES_SERVICE_PORT are not set) and $KUBECONFIG is not set")


# ---- exec plugins and auth providers (the kube extra) ---------------------------------------

PLUGIN = """
import json, pathlib, sys
runs = pathlib.Path(sys.argv[1])
runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": json.loads(sys.argv[2])}))
"""


def exec_user(runs: Path, status: dict) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": ["-c", PLUGIN, str(runs), json.dumps(status)],
                     "interactiveMode": "Never"}}


def timestamp(seconds_from_now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


async def test_an_exec_plugin_runs_once_until_its_token_expires_or_is_rejected(tmp_path):
    runs = tmp_path / "runs"
    path = kubeconfig(tmp_path / "config", exec_user(
        runs, {"token": "exec-token", "expirationTimestamp": timestamp(3600)}))
    credentials = from_kubeconfig(str(path)).credentials
    assert [await credentials.current() for _ in range(3)] == [Auth("Bearer exec-token")] * 3
    assert runs.read_text() == "1"
    credentials.rejected()  # a 401: the next request runs the plugin again
    assert await credentials.current() == Auth("Bearer exec-token")
    assert runs.read_text() == "2"


async def test_an_exec_token_close_to_expiry_is_renewed(tmp_path):
    runs = tmp_path / "runs"
    path = kubeconfig(tmp_path / "config", exec_user(
        runs, {"token": "short", "expirationTimestamp": timestamp(30)}))  # < 60 s margin
    credentials = from_kubeconfig(str(path)).credentials
    await credentials.current()
    await credentials.current()
    assert runs.read_text() == "2"


async def test_an_exec_plugin_may_hand_out_a_client_certificate(tmp_path, pki):
    _, cert, key = pki
    path = kubeconfig(tmp_path / "config", exec_user(
        tmp_path / "runs", {"clientCertificateData": cert.read_text(),
                            "clientKeyData": key.read_text()}))
    assert await auth_of(path) == Auth(None, cert.read_bytes(), key.read_bytes())


async def test_a_failing_exec_plugin(tmp_path):
    path = kubeconfig(tmp_path / "config", {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": ["-c", "import sys; sys.exit('no session: run aws sso login')"]}})
    credentials = from_kubeconfig(str(path)).credentials
    with pytest.raises(CredentialsError) as caught:
        await credentials.current()
    assert str(caught.value) == (f"exec plugin {sys.executable}: exec: process returned 1. "
                                 "no session: run aws sso login")


def without_kubernetes(monkeypatch) -> None:
    """As if the kube extra were not installed: importing kubernetes raises ImportError."""
    for name in [n for n in sys.modules if n.split(".")[0] == "kubernetes"] + ["kubernetes"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "exporter.kubeapi.plugins", raising=False)
    monkeypatch.delattr(exporter.kubeapi, "plugins", raising=False)


def test_an_exec_plugin_without_the_kubernetes_package(tmp_path, monkeypatch):
    without_kubernetes(monkeypatch)
    path = kubeconfig(tmp_path / "config", exec_user(tmp_path / "runs", {"token": "t"}))
    with pytest.raises(ConfigError) as caught:
        from_kubeconfig(str(path))
    message = str(caught.value)
    assert message.startswith(f"kubeconfig {path}: user 'u' gets its credentials from an exec "
                              f"credential plugin ({sys.executable}), which needs the "
                              "kubernetes package (")
    assert message.endswith("); install podresources-exporter[kube]")
    assert "\n" not in message


async def test_an_oidc_auth_provider(tmp_path):
    claims = b64(json.dumps({"iss": "https://idp.example.com", "exp": time.time() + 3600})
                 .encode()).rstrip("=").replace("+", "-").replace("/", "_")
    id_token = f"eyJhbGciOiJSUzI1NiJ9.{claims}.c2lnbmF0dXJl"
    path = kubeconfig(tmp_path / "config", {"auth-provider": {"name": "oidc", "config": {
        "client-id": "exporter", "idp-issuer-url": "https://idp.example.com",
        "id-token": id_token}}})
    assert await auth_of(path) == Auth(f"Bearer {id_token}")
