"""Basic auth against the web config's bcrypt hashes, at a bounded cost.

A bcrypt check takes tens of milliseconds on purpose, so it runs in one thread off the event
loop, answers are remembered (keyed by an HMAC under a per-process key: a Prometheus server
scraping every 15 s pays for one check, a repeated wrong password for none), checks in flight
are capped in all and per client address (the excess gets 429), and an unknown user is checked
against a dummy hash of the costliest user's cost, so no timing tells which users exist.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import os
import secrets
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import bcrypt

REALM = "podresources-exporter"

_BCRYPT_ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# bcrypt reads at most 72 bytes of a password. Go's x/crypto/bcrypt (exporter-toolkit),
# htpasswd and bcrypt for Python before 5.0 ignore the rest; bcrypt 5.0 raises instead.
_PASSWORD_BYTES = 72
_GRANTED_CACHE = 64    # credentials that passed: Prometheus servers, a few at most
_REFUSED_CACHE = 256   # credentials that failed, so a repeated wrong one costs no bcrypt
_CHECKS_QUEUED = 16    # bcrypt checks waiting or running, in all
_CHECKS_PER_PEER = 2   # ... and from one client address


def _timed_check(password: bytes, hashed: bytes) -> tuple[bool, float]:
    started = time.perf_counter()
    matched = bcrypt.checkpw(password, hashed)
    return matched, time.perf_counter() - started


class _BcryptWorker:
    """Runs bcrypt checks one at a time on a thread of its own, with a short queue.

    A check takes tens to hundreds of milliseconds of CPU on purpose. On their own thread the
    checks never take the threads the refresh uses, one at a time they never take more than one
    core, and with the queue bounded (per client address, too) a flood of wrong passwords is
    answered 429 at once instead of piling up while scrapes wait.
    """

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._queued = 0
        self._by_peer: dict[str, int] = {}

    async def check(self, password: bytes, hashed: bytes,
                    peer: str) -> tuple[bool, float] | None:
        """(matched, seconds of bcrypt) or None when too many checks are queued."""
        if self._queued >= _CHECKS_QUEUED or self._by_peer.get(peer, 0) >= _CHECKS_PER_PEER:
            return None
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bcrypt")
        self._queued += 1
        self._by_peer[peer] = self._by_peer.get(peer, 0) + 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, _timed_check, password, hashed)
        finally:
            self._queued -= 1
            if self._by_peer[peer] <= 1:
                del self._by_peer[peer]
            else:
                self._by_peer[peer] -= 1


_WORKER = _BcryptWorker()


class BasicAuth:
    """Checks ``Authorization: Basic`` against bcrypt hashes, at a bounded cost.

    - Answers are remembered, keyed by an HMAC of the credentials under a per-process random
      key: passing credentials in a small LRU (a Prometheus server pays for one check, not one
      per scrape), failing ones in another, so a flood of wrong passwords cannot push out the
      right ones.
    - Concurrent requests with the same credentials share one check.
    - Passwords longer than 72 bytes are checked on their first 72, as Go's bcrypt
      (exporter-toolkit), htpasswd and older Python bcrypt do, so hashes those tools made work.
    - Equal cost, whatever the user name: an unknown user is checked against a dummy hash with
      the highest cost among the configured users, and a wrong password for a user whose hash
      is cheaper is answered only once a check at that highest cost would have finished (bcrypt
      time doubles per cost step). The timing of a refusal tells neither whether the user
      exists nor its cost. Successes are not delayed.
    """

    def __init__(self, users: dict[str, bytes]):
        self._users = users
        self._costs = {name: int(hashed[4:6]) for name, hashed in users.items()}
        self._max_cost = max(self._costs.values())
        # A well-formed hash of nothing: the check costs the full time and never matches.
        self._dummy = bcrypt.gensalt(rounds=self._max_cost) + "".join(
            secrets.choice(_BCRYPT_ALPHABET) for _ in range(31)).encode()
        self._key = os.urandom(32)
        self._granted: OrderedDict[bytes, None] = OrderedDict()
        self._refused: OrderedDict[bytes, None] = OrderedDict()
        self._pending: dict[bytes, asyncio.Future[bool | None]] = {}

    async def check(self, authorization: str | None, peer: str = "") -> bool | None:
        """True or False; None when too many checks are queued (answer 429)."""
        credentials = _basic_credentials(authorization)
        if credentials is None:
            return False
        user, password = credentials
        key = hmac.new(self._key, len(user).to_bytes(4, "big") + user + password,
                       hashlib.sha256).digest()
        for cache, answer in ((self._granted, True), (self._refused, False)):
            if key in cache:
                cache.move_to_end(key)
                return answer
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            checked = await self._check(user, password, key, peer)
            future.set_result(checked)
        except BaseException:
            future.cancel()  # requests sharing this check fail with this one
            raise
        finally:
            del self._pending[key]
        return checked

    async def _check(self, user: bytes, password: bytes, key: bytes, peer: str) -> bool | None:
        try:
            name: str | None = user.decode("utf-8")
        except UnicodeDecodeError:
            name = None  # YAML keys are text: no configured user has this name
        hashed = self._users.get(name) if name is not None else None
        verdict = await _WORKER.check(password[:_PASSWORD_BYTES], hashed or self._dummy, peer)
        if verdict is None:
            return None
        matched, seconds = verdict
        granted = matched and hashed is not None
        cache, size = (self._granted, _GRANTED_CACHE) if granted \
            else (self._refused, _REFUSED_CACHE)
        cache[key] = None
        if len(cache) > size:
            cache.popitem(last=False)
        if not granted and name in self._costs and self._costs[name] < self._max_cost:
            await asyncio.sleep(seconds * ((1 << (self._max_cost - self._costs[name])) - 1))
        return granted


def _basic_credentials(authorization: str | None) -> tuple[bytes, bytes] | None:
    if not authorization:
        return None
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None
