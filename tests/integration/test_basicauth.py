"""Basic auth's bcrypt cost, bounded (exporter/web/basicauth.py): an unknown user costs what
the costliest user costs, a flood of wrong passwords neither evicts nor queues the right one,
one check serves concurrent requests with the same credentials, too many checks at once get
429, and legitimate scrapes keep answering through a flood.
"""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp
import bcrypt
import pytest

from exporter.web import basicauth

from ..support.harness import Node, small_profile
from ..support.webconfig import HASH, PASSWORD, Served, auth, write_config


class CountingCheckpw:
    """bcrypt.checkpw as it is, counting calls and the most that ran at once."""

    def __init__(self):
        self.hashes: list[bytes] = []
        self.passwords: list[bytes] = []
        self.running = self.most = 0
        self.lock = threading.Lock()
        self.real = bcrypt.checkpw

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self.lock:
            self.hashes.append(hashed)
            self.passwords.append(password)
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.02)  # long enough for concurrent checks to overlap, if they could
            return self.real(password, hashed)
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def checkpw(monkeypatch):
    counting = CountingCheckpw()
    monkeypatch.setattr(basicauth.bcrypt, "checkpw", counting)
    return counting


def header(user: str, password: str) -> str:
    return auth(user, password)["Authorization"]


async def test_unknown_users_cost_what_the_costliest_user_costs(checkpw):
    cheap = bcrypt.hashpw(b"a", bcrypt.gensalt(rounds=4))
    costly = bcrypt.hashpw(b"b", bcrypt.gensalt(rounds=6))
    basic = basicauth.BasicAuth({"cheap": cheap, "costly": costly})
    assert await basic.check(header("nobody", "x")) is False
    assert checkpw.hashes[-1][:7] == b"$2b$06$"
    # a wrong password for the cheap user waits out the difference: 2**(6-4) - 1 = 3 checks
    sleeps = []
    real_sleep = asyncio.sleep

    async def recording_sleep(seconds):
        sleeps.append(seconds)
        await real_sleep(0)
    basicauth.asyncio.sleep, saved = recording_sleep, basicauth.asyncio.sleep
    try:
        assert await basic.check(header("cheap", "wrong")) is False
        assert await basic.check(header("costly", "wrong")) is False
        assert await basic.check(header("cheap", "a")) is True
    finally:
        basicauth.asyncio.sleep = saved
    assert len(sleeps) == 1 and sleeps[0] >= 3 * 0.02  # the check itself took 20 ms or more


async def test_a_flood_of_wrong_passwords_neither_evicts_nor_queues_the_right_one(checkpw):
    basic = basicauth.BasicAuth({"prometheus": HASH.encode()})
    assert await basic.check(header("prometheus", PASSWORD), "10.0.0.1") is True
    answers = await asyncio.gather(*(basic.check(header("prometheus", f"wrong {n}"), "10.6.6.6")
                                     for n in range(400)))
    assert checkpw.most == 1                       # one check at a time
    assert answers.count(False) == 2               # two from one address at a time ...
    assert answers.count(None) == 398              # ... the rest answered 429 at once
    calls = len(checkpw.hashes)
    for n in range(300):                           # more wrong ones than the caches hold
        await basic.check(header("prometheus", f"again {n}"), f"10.7.{n // 250}.{n % 250}")
    calls = len(checkpw.hashes)
    assert await basic.check(header("prometheus", PASSWORD), "10.0.0.1") is True
    assert len(checkpw.hashes) == calls            # still remembered: no check needed
    assert await basic.check(header("prometheus", "again 299"), "10.6.6.6") is False
    assert len(checkpw.hashes) == calls            # a repeated wrong one costs nothing either


async def test_concurrent_requests_with_the_same_credentials_share_one_check(checkpw):
    basic = basicauth.BasicAuth({"prometheus": HASH.encode()})
    answers = await asyncio.gather(*(basic.check(header("prometheus", PASSWORD), "10.0.0.1")
                                     for _ in range(20)))
    assert answers == [True] * 20 and len(checkpw.hashes) == 1


async def test_too_many_checks_at_once_get_429(tmp_path, checkpw):
    path = write_config(tmp_path, f"basic_auth_users: {{prometheus: '{HASH}'}}\n")
    async with Node(small_profile()) as node, Served(node, path) as served:
        answers = await asyncio.gather(*(served.get("/metrics", scheme="http",
                                                    headers=auth("prometheus", f"wrong {n}"))
                                         for n in range(10)))
    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [401, 401] + [429] * 8
    assert all(headers["Retry-After"] == "1" for status, headers, _ in answers if status == 429)


async def test_a_wrong_password_flood_leaves_legitimate_scrapes_answering(tmp_path, checkpw):
    """A real server under a flood of new wrong passwords from one address, more than the
    caches hold: a scraper on another address is checked once, answered 200 throughout; the
    flood gets 401 or 429, bcrypt runs one check at a time, probes answer."""
    path = write_config(tmp_path, f"basic_auth_users: {{prometheus: '{HASH}'}}\n")
    legit: list[int] = []
    probes: list[int] = []
    async with Node(small_profile()) as node, Served(node, path) as served:
        url = f"http://127.0.0.1:{served.port}"
        flood_started = asyncio.Event()

        async def flood() -> list[int]:
            # 50 connections at a time: under the connection limit, so this is about bcrypt
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=50)) as session:
                async def wrong(n: int) -> int:
                    async with session.get(url + "/metrics",
                                           headers=auth("prometheus", f"wrong {n}")) as response:
                        await response.read()
                        return response.status
                tasks = [asyncio.create_task(wrong(n)) for n in range(300)]
                flood_started.set()
                return await asyncio.gather(*tasks)

        async def scraper() -> None:
            await flood_started.wait()
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
                    local_addr=("127.0.0.2", 0))) as session:
                for _ in range(10):
                    async with session.get(url + "/metrics",
                                           headers=auth("prometheus", PASSWORD)) as response:
                        body = await response.text()
                        legit.append(response.status)
                        assert "podresources_up" in body
                    async with session.get(url + "/healthz") as response:
                        probes.append(response.status)

        answers, _ = await asyncio.gather(flood(), scraper())
    assert legit == [200] * 10
    assert probes == [200] * 10
    assert set(answers) <= {401, 429} and answers.count(429) > 0
    assert checkpw.most == 1
    # one check for the right password, whatever the flood did to the caches
    assert checkpw.passwords.count(PASSWORD.encode()) == 1
