"""Hostile HTTP clients: what silent, slow and wrong-password connections cost the exporter.

Runs the real exporter process against the real simulator process, with and without TLS, and
for each scenario prints the exporter's resident memory before, during and after the attack,
how long the exporter took to close the attacking connections, and how legitimate scrapes
(one every --legit-interval seconds, each on a new connection from 127.0.0.2, with the right
password) fared meanwhile:

    silent      N TCP connections that never send a byte
    handshake   N connections that send the first 5 bytes of a TLS record, then nothing
    slowloris   N connections that send a request line, then one header byte every 5 s
                (over TLS when TLS is on)
    auth-flood  wrong passwords at --flood-rate requests a second, each a new password

    python -m benchmarks.connections                      # every scenario, plain and TLS
    python -m benchmarks.connections --scenario silent --tls on --connections 1500
    python -m benchmarks.connections --json out.json

Not part of the test suite: it takes minutes and reports figures rather than asserting them.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import ipaddress
import json
import os
import platform
import resource
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from .harness import REPO, cpu_seconds, free_port, rss_kib, terminate

USER, PASSWORD = "prometheus", "correct horse battery staple"
SCENARIOS = ("silent", "handshake", "slowloris", "auth-flood")


def write_tls_files(directory: Path) -> Path:
    """A self-signed CA and a server certificate for 127.0.0.1; returns the CA file."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "benchmark")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return directory / "tls.crt"


class Bench:
    def __init__(self, args: argparse.Namespace, tls: bool):
        self.args, self.tls = args, tls
        self.workdir = Path(tempfile.mkdtemp(prefix="conn-bench-", dir="/tmp"))
        self.socket = self.workdir / "pod-resources" / "kubelet.sock"
        self.sysfs = self.workdir / "sys"
        self.port = free_port()
        self.exporter: asyncio.subprocess.Process | None = None
        self.simulator: asyncio.subprocess.Process | None = None
        self.client_tls: ssl.SSLContext | bool = False

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    async def start(self) -> None:
        import bcrypt

        from exporter.simulator import load_profile, write_sysfs

        write_sysfs(load_profile(self.args.profile), self.sysfs)
        self.simulator = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "simulate", "--profile", self.args.profile,
            "--socket", str(self.socket), "--sysfs-root", str(self.sysfs), "--log-level",
            "warning", cwd=REPO, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
        for _ in range(100):
            if self.socket.exists():
                break
            await asyncio.sleep(0.1)
        hashed = bcrypt.hashpw(PASSWORD.encode(),
                               bcrypt.gensalt(rounds=self.args.bcrypt_cost)).decode()
        config = f"basic_auth_users: {{{USER}: '{hashed}'}}\n"
        if self.tls:
            ca = write_tls_files(self.workdir)
            config += "tls_server_config: {cert_file: tls.crt, key_file: tls.key}\n"
            self.client_tls = ssl.create_default_context(cafile=ca)
        (self.workdir / "web-config.yml").write_text(config)
        self.log = open(self.workdir / "exporter.log", "wb")  # noqa: SIM115  # the child's log, open while it runs
        self.exporter = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "--socket", str(self.socket),
            "--sysfs-root", str(self.sysfs), "--listen-address", f"127.0.0.1:{self.port}",
            "--web-config-file", str(self.workdir / "web-config.yml"), cwd=REPO,
            stdout=asyncio.subprocess.DEVNULL, stderr=self.log)
        async with aiohttp.ClientSession() as session:
            for _ in range(200):
                if (await self.scrape(session))[0]:
                    return
                await asyncio.sleep(0.1)
        raise RuntimeError("exporter did not start")

    async def stop(self) -> None:
        await terminate((self.exporter, self.simulator))
        self.log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    async def scrape(self, session: aiohttp.ClientSession, password: str = PASSWORD,
                     timeout: float = 10.0) -> tuple[bool, float]:
        """One scrape on a new connection: (200 with a body?, seconds taken)."""
        token = base64.b64encode(f"{USER}:{password}".encode()).decode()
        started = time.monotonic()
        try:
            async with session.get(self.url + "/metrics", ssl=self.client_tls,
                                   headers={"Authorization": f"Basic {token}",
                                            "Connection": "close"},
                                   timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                body = await response.read()
                return response.status == 200 and len(body) > 0, time.monotonic() - started
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False, time.monotonic() - started

    # ---- attackers ----------------------------------------------------------------------

    async def attacker(self, kind: str, closed_after: list) -> None:
        """One hostile connection; appends the seconds until the exporter closed it."""
        started = time.monotonic()
        try:
            # A slow request needs a finished handshake to reach HTTP at all.
            tls = self.client_tls if kind == "slowloris" and self.tls else None
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=tls)
        except OSError:
            closed_after.append(0.0)
            return
        try:
            if kind == "handshake":
                writer.write(b"\x16\x03\x01\x02\x00")  # a record header promising 512 bytes
            elif kind == "slowloris":
                writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            deadline = started + self.args.close_wait
            while time.monotonic() < deadline:
                try:
                    data = await asyncio.wait_for(reader.read(4096), 5 if kind == "slowloris"
                                                  else deadline - time.monotonic())
                except TimeoutError:
                    if kind == "slowloris":
                        writer.write(b"X")
                        await writer.drain()
                    continue
                if not data:
                    break
            else:
                return  # still open
            closed_after.append(time.monotonic() - started)
        except (OSError, asyncio.IncompleteReadError):
            closed_after.append(time.monotonic() - started)
        finally:
            writer.close()

    async def flood(self, session: aiohttp.ClientSession, seconds: float,
                    answers: dict) -> None:
        """Wrong passwords at --flood-rate a second, each one new."""
        tasks, count = [], 0
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            count += 1
            tasks.append(asyncio.create_task(self.wrong(session, f"wrong-{count}", answers)))
            await asyncio.sleep(1 / self.args.flood_rate)
        await asyncio.gather(*tasks)

    async def wrong(self, session, password: str, answers: dict) -> None:
        token = base64.b64encode(f"{USER}:{password}".encode()).decode()
        try:
            async with session.get(self.url + "/metrics", ssl=self.client_tls,
                                   headers={"Authorization": f"Basic {token}"},
                                   timeout=aiohttp.ClientTimeout(total=30)) as response:
                await response.read()
                answers[response.status] = answers.get(response.status, 0) + 1
        except (TimeoutError, aiohttp.ClientError, OSError):
            answers["error"] = answers.get("error", 0) + 1

    # ---- one scenario -------------------------------------------------------------------

    async def run(self, scenario: str) -> dict:
        pid = self.exporter.pid
        samples: list[int] = []
        scrapes: list[tuple[bool, float]] = []
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                samples.append(rss_kib(pid) or 0)
                await asyncio.sleep(0.5)

        async def watch() -> None:
            # Legitimate scrapes come from another address, as a Prometheus pod would.
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
                    force_close=True, local_addr=("127.0.0.2", 0))) as session:
                while not stop.is_set():
                    tick = time.monotonic()
                    scrapes.append(await self.scrape(session))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), max(
                            0.0, self.args.legit_interval - (time.monotonic() - tick)))

        await asyncio.sleep(1)
        before = rss_kib(pid)
        cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
        watcher = asyncio.gather(sample(), watch())
        closed_after: list[float] = []
        answers: dict = {}
        if scenario == "auth-flood":
            # The same file, rewritten: an exporter that reloads it starts with cold caches.
            config = self.workdir / "web-config.yml"
            config.write_text(config.read_text())
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
                    limit=0, force_close=True)) as session:
                await self.flood(session, self.args.flood_seconds, answers)
            attacked = self.args.flood_seconds
        else:
            attackers = [asyncio.create_task(self.attacker(scenario, closed_after))
                         for _ in range(self.args.connections)]
            await asyncio.gather(*attackers)
            attacked = time.monotonic() - wall_before
        cpu = (cpu_seconds(pid) - cpu_before) / (time.monotonic() - wall_before)
        stop.set()
        await watcher
        await asyncio.sleep(3)
        after = rss_kib(pid)
        good = [seconds for ok, seconds in scrapes if ok]
        result = {
            "scenario": scenario, "tls": self.tls,
            "rss_mib_before": round(before / 1024, 1),
            "rss_mib_peak": round(max(samples, default=0) / 1024, 1),
            "rss_mib_after": round(after / 1024, 1),
            "exporter_cpu_percent": round(100 * cpu),
            "attack_seconds": round(attacked, 1),
            "legit_scrapes": f"{len(good)}/{len(scrapes)}",
            "legit_scrape_p50_ms": round(1000 * statistics.median(good)) if good else None,
            "legit_scrape_max_ms": round(1000 * max(good)) if good else None,
        }
        if scenario == "auth-flood":
            result["flood_answers"] = {str(k): v for k, v in sorted(answers.items(), key=str)}
        else:
            result["connections"] = self.args.connections
            result["closed_by_exporter"] = len(closed_after)
            result["all_closed_within_s"] = (round(max(closed_after), 1)
                                             if len(closed_after) == self.args.connections
                                             else None)
        log = (self.workdir / "exporter.log").read_bytes()
        result["log_lines"] = log.count(b"\n")
        result["log_tracebacks"] = log.count(b"Traceback")
        return result


async def main_async(args: argparse.Namespace) -> list[dict]:
    results = []
    for tls in {"on": [True], "off": [False], "both": [False, True]}[args.tls]:
        for scenario in args.scenario or SCENARIOS:
            if scenario == "handshake" and not tls:
                continue
            bench = Bench(args, tls)  # a fresh exporter per scenario: memory is comparable
            try:
                await bench.start()
                results.append(await bench.run(scenario))
            finally:
                await bench.stop()
            print(json.dumps(results[-1]), flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    parser.add_argument("--tls", choices=("on", "off", "both"), default="both")
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--close-wait", type=float, default=60.0,
                        help="seconds to wait for the exporter to close an attacker")
    parser.add_argument("--flood-rate", type=float, default=30.0, help="wrong passwords/s")
    parser.add_argument("--flood-seconds", type=float, default=20.0)
    parser.add_argument("--legit-interval", type=float, default=1.0,
                        help="seconds between legitimate scrapes (default: 1)")
    parser.add_argument("--bcrypt-cost", type=int, default=10)
    parser.add_argument("--profile", default="dual-socket-gpu")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.connections + 256)),
                                                hard))
    results = asyncio.run(main_async(args))
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, profile {args.profile}, "
          f"bcrypt cost {args.bcrypt_cost}")
    keys = [k for k in results[0] if k not in ("scenario", "tls")] if results else []
    for result in results:
        print(f"{result['scenario']:>10} tls={'on ' if result['tls'] else 'off'}  "
              + "  ".join(f"{k}={result.get(k)}" for k in keys if k in result))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
