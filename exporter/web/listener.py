"""The HTTP listener: accepts connections and keeps hostile ones cheap.

aiohttp parses and answers requests; this module owns each connection before and around that,
because asyncio's own server does not defend itself:

- **A connection costs nothing until it speaks.** An accepted socket is only watched until its
  first byte arrives; no transport, no HTTP parser and no TLS state exist before that. (With
  TLS, asyncio's server builds a TLS protocol at accept time and each one preallocates a
  256 KiB read buffer, so silent connections alone could exhaust the pod's memory.) TLS
  connections get a 32 KiB read buffer; a TLS record is at most about 16 KiB.
- **A cap on connections.** At ``max_connections`` a new connection displaces the one that has
  been idle longest (never one with a request in flight); when every connection is busy,
  accepting pauses and the kernel's backlog holds the rest.
- **Deadlines.** A connection must deliver a complete first request within
  ``request_timeout`` of being accepted (TLS handshake included, which alone may take at most
  ``tls_handshake_timeout``); between requests aiohttp closes it after ``idle_timeout``, also
  when the next request is only half sent (slowloris). A peer that stops reading a response
  for ``write_timeout`` is dropped, so a stuck reader holds at most its socket buffers.
- **Accept failures** (out of file descriptors, for instance) pause accepting for a second
  instead of retrying in a tight loop, and are logged once when they start and once when they
  end.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
import time
from asyncio import sslproto
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Peers that gave up between connect() and accept(): nothing to report.
_GONE = (errno.ECONNABORTED, errno.EPROTO, errno.EPERM)
_SWEEP_SECONDS = 1.0
_ACCEPT_BATCH = 64
_SPARED = 8  # idle connections looked at for fresh data before one is displaced


@dataclass(frozen=True)
class Limits:
    """What one client may cost the exporter; tests shorten the timeouts."""

    max_connections: int = 100
    request_timeout: float = 30.0
    idle_timeout: float = 30.0
    tls_handshake_timeout: float = 10.0
    tls_shutdown_timeout: float = 3.0
    write_timeout: float = 30.0
    accept_retry: float = 1.0


TLSSource = Callable[[], "ssl.SSLContext | None"]


def _host(peer: object) -> str:
    """The client address of a peer as accept() gives it, without the port."""
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


class _Connection:
    """One accepted connection, from accept() to close."""

    __slots__ = (
        "accepted",
        "buffered",
        "busy",
        "closed",
        "handler",
        "idle_since",
        "peer",
        "progress_at",
        "requests",
        "sock",
        "transport",
    )

    def __init__(self, sock: socket.socket, peer: Any, now: float) -> None:
        self.sock = sock
        self.peer = peer
        self.accepted = now
        self.idle_since = now
        self.busy = 0          # requests in flight
        self.requests = 0      # requests received
        self.transport: asyncio.Transport | None = None  # None: waiting for a first byte
        self.handler: asyncio.BaseProtocol | None = None  # the aiohttp protocol serving it
        self.buffered = 0      # write buffer size at the last sweep
        self.progress_at = now
        self.closed = False


class _PlainProtocol(asyncio.Protocol):
    """aiohttp's protocol for one plain connection, telling the listener when it ends."""

    def __init__(self, inner: asyncio.Protocol, ended: Callable[[], None]) -> None:
        self.inner, self.ended = inner, ended

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self.inner.connection_lost(exc)
        finally:
            self.ended()


class _TLSProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a read buffer sized for TLS records, not 256 KiB."""

    max_size = 32 * 1024

    def __init__(self, *args: Any, ended: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ended = ended

    def connection_lost(self, exc: BaseException | None) -> None:
        try:
            super().connection_lost(exc)
        finally:
            self._ended()


class Listener:
    """Accepts on the listening sockets and hands connections to ``protocol_factory``."""

    def __init__(self, protocol_factory: Callable[[], asyncio.Protocol],
                 tls: TLSSource | None = None, limits: Limits = Limits()):
        self._factory = protocol_factory
        self._tls = tls
        self.limits = limits
        self._loop = asyncio.get_running_loop()
        self.sockets: list[socket.socket] = []
        self._connections: dict[_Connection, None] = {}
        self._per_host: dict[str, int] = {}  # open connections by client address
        self._idle: OrderedDict[_Connection, None] = OrderedDict()  # oldest idle first
        self._by_handler: dict[object, _Connection] = {}
        self._accepting = False
        self._paused_for: str | None = None  # why accepting is paused, for the log
        self._failures = 0
        self._failing_since = 0.0
        self._retry: asyncio.TimerHandle | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._full_since: float | None = None
        self._displaced = 0
        self._closing = False

    # ---- listening sockets ------------------------------------------------------------------

    async def bind(self, host: str | None, port: int, backlog: int = 128) -> int:
        """Bind and listen like asyncio's create_server; returns the bound port.

        An empty host means every interface (IPv4 and IPv6 where available); with port 0,
        every socket gets the port the first one was given.
        """
        infos = await self._loop.getaddrinfo(host or None, port, family=socket.AF_UNSPEC,
                                             type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        seen = set()
        try:
            for family, kind, proto, _, address in infos:
                if (family, address) in seen:
                    continue
                seen.add((family, address))
                if port == 0 and self.sockets:
                    address = (address[0], self.sockets[0].getsockname()[1], *address[2:])
                sock = socket.socket(family, kind, proto)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    sock.bind(address)
                except OSError as error:
                    sock.close()
                    if error.errno == errno.EADDRNOTAVAIL and len(infos) > 1:
                        continue  # e.g. IPv6 disabled in this network namespace
                    raise OSError(error.errno, f"error while attempting to bind on address "
                                               f"{address!r}: {error.strerror}") from None
                sock.setblocking(False)
                sock.listen(backlog)
                self.sockets.append(sock)
        except BaseException:
            self.close()
            raise
        if not self.sockets:
            raise OSError(errno.EADDRNOTAVAIL, f"no address to listen on for {host!r}")
        self._resume()
        return int(self.sockets[0].getsockname()[1])

    def _resume(self) -> None:
        if self._accepting or self._closing:
            return
        self._accepting = True
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _pause(self, why: str) -> None:
        self._paused_for = why
        if self._accepting:
            self._accepting = False
            for sock in self.sockets:
                self._loop.remove_reader(sock.fileno())

    # ---- accepting ----------------------------------------------------------------------

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(_ACCEPT_BATCH):
            if len(self._connections) >= self.limits.max_connections and not self._idle:
                self._pause("full")  # every connection is busy: the backlog waits
                self._note_full()
                return
            try:
                sock, peer = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno in _GONE:
                    continue
                self._accept_failed(error)
                return
            if self._failures:
                log.info("HTTP: accepting connections again (%d attempts failed over %.0f s)",
                         self._failures, time.monotonic() - self._failing_since)
                self._failures = 0
            sock.setblocking(False)
            if len(self._connections) >= self.limits.max_connections:
                self._displace()
            self._admit(sock, peer)

    def _accept_failed(self, error: OSError) -> None:
        """Out of descriptors or memory, say: try again in a while, and say so once."""
        if not self._failures:
            self._failing_since = time.monotonic()
            log.warning("HTTP: cannot accept connections: %s (%d open); retrying every %g s",
                        error.strerror or error, len(self._connections),
                        self.limits.accept_retry)
        self._failures += 1
        self._pause("failing")
        self._retry = self._loop.call_later(self.limits.accept_retry, self._retry_accept)

    def _retry_accept(self) -> None:
        self._retry = None
        if self._paused_for == "failing":
            self._paused_for = None
            self._resume()

    def _note_full(self) -> None:
        if self._full_since is None:
            self._full_since = time.monotonic()
            log.warning("HTTP: %d connections open, the limit; closing the longest idle ones "
                        "to admit new ones", self.limits.max_connections)

    def _displace(self) -> None:
        """Close an idle connection of the address holding the most connections: its longest
        idle one, preferring one that never spoke.

        One address flooding the house so displaces its own connections, not a scraper's
        keep-alive connection from elsewhere, however long that one has been idle. A client
        that connected just before a flood of connections is the oldest, and its request may be
        waiting unread in its socket: that one gets served instead. Among the oldest few, a
        connection that has not sent a byte goes before one that has.
        """
        self._note_full()
        if not self._idle:
            return
        most = max(self._per_host.get(_host(conn.peer), 0) for conn in self._idle)
        pool = [conn for conn in self._idle if self._per_host.get(_host(conn.peer), 0) == most]
        served: set[_Connection] = set()
        for conn in pool[:_SPARED]:
            if conn.handler is not None:
                continue  # it spoke: look for one that never did first
            if self._has_data(conn):
                self._first_byte(conn)
                served.add(conn)
                continue
            if not conn.closed:
                self._displaced += 1
                self._close(conn)
                return
        oldest = next((conn for conn in pool if not conn.closed and conn in self._idle
                       and conn not in served), None)
        if oldest is not None:
            self._displaced += 1
            self._close(oldest)

    @staticmethod
    def _has_data(conn: _Connection) -> bool:
        try:
            return bool(conn.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:
            return False

    def _admit(self, sock: socket.socket, peer: Any) -> None:
        conn = _Connection(sock, peer, self._loop.time())
        self._connections[conn] = None
        host = _host(peer)
        self._per_host[host] = self._per_host.get(host, 0) + 1
        self._idle[conn] = None
        try:
            self._loop.add_reader(sock.fileno(), self._first_byte, conn)
        except (OSError, ValueError):
            self._close(conn)
            return
        if self._sweeper is None:
            self._sweeper = self._loop.call_later(_SWEEP_SECONDS, self._sweep)

    def _first_byte(self, conn: _Connection) -> None:
        """The peer spoke (or hung up): now build its transport, TLS and HTTP parser."""
        self._loop.remove_reader(conn.sock.fileno())
        try:
            if not conn.sock.recv(1, socket.MSG_PEEK):
                self._close(conn)  # closed before saying anything
                return
        except (BlockingIOError, InterruptedError):
            self._loop.add_reader(conn.sock.fileno(), self._first_byte, conn)
            return
        except OSError:
            self._close(conn)
            return
        ended = lambda: self._ended(conn)  # noqa: E731
        handler = self._factory()
        try:
            context = self._tls() if self._tls is not None else None
        except Exception:  # a broken certificate source must not take the listener down
            log.exception("HTTP: cannot get the TLS settings; closing the connection")
            self._close(conn)
            return
        if context is not None:
            protocol: asyncio.BaseProtocol = _TLSProtocol(
                self._loop, handler, context, None, server_side=True,
                ssl_handshake_timeout=self.limits.tls_handshake_timeout,
                ssl_shutdown_timeout=self.limits.tls_shutdown_timeout, ended=ended)
        else:
            protocol = _PlainProtocol(handler, ended)
        conn.handler = handler
        self._by_handler[handler] = conn
        self._loop.create_task(self._connect(conn, protocol))

    async def _connect(self, conn: _Connection, protocol: asyncio.BaseProtocol) -> None:
        try:
            transport, _ = await self._loop.connect_accepted_socket(lambda: protocol, conn.sock)
        except Exception as error:
            log.debug("HTTP: connection from %s failed at set-up: %s", conn.peer, error)
            conn.sock.close()
            self._ended(conn)
            return
        if conn.closed:
            transport.abort()
        else:
            conn.transport = transport

    # ---- requests (from the server's first middleware) ------------------------------------

    def request_started(self, handler: asyncio.BaseProtocol) -> Callable[[], None] | None:
        """Mark the connection busy; returns what to call when the request is answered."""
        conn = self._by_handler.get(handler)
        if conn is None:
            return None
        conn.requests += 1
        conn.busy += 1
        self._idle.pop(conn, None)
        return lambda: self._request_done(conn)

    def _request_done(self, conn: _Connection) -> None:
        conn.busy -= 1
        if conn.busy == 0 and not conn.closed:
            conn.idle_since = self._loop.time()
            self._idle[conn] = None
            if self._paused_for == "full":
                self._paused_for = None
                self._resume()

    # ---- ending ---------------------------------------------------------------------------

    def _sweep(self) -> None:
        """Once a second: drop connections past their deadlines."""
        self._sweeper = None
        now = self._loop.time()
        limits = self.limits
        for conn in list(self._connections):
            if conn.requests == 0 and now - conn.accepted > limits.request_timeout:
                self._close(conn)
                continue
            transport = conn.transport
            if transport is None:
                continue
            buffered = transport.get_write_buffer_size()
            if buffered == 0 or buffered < conn.buffered or conn.buffered == 0:
                conn.progress_at = now
            elif now - conn.progress_at > limits.write_timeout:
                log.debug("HTTP: %s stopped reading its response; dropping it", conn.peer)
                self._close(conn)
                continue
            conn.buffered = buffered
        if self._full_since is not None and len(self._connections) * 5 < \
                limits.max_connections * 4:
            log.info("HTTP: below the connection limit again (%d connections displaced in "
                     "%.0f s)", self._displaced, time.monotonic() - self._full_since)
            self._full_since, self._displaced = None, 0
        if self._connections and not self._closing:
            self._sweeper = self._loop.call_later(_SWEEP_SECONDS, self._sweep)

    def _close(self, conn: _Connection) -> None:
        if conn.closed:
            return
        conn.closed = True
        if conn.transport is not None:
            conn.transport.abort()  # the protocol's connection_lost will call _ended
            return
        if conn.handler is None:  # still waiting for its first byte
            with contextlib.suppress(OSError, ValueError):
                self._loop.remove_reader(conn.sock.fileno())
            conn.sock.close()
            self._ended(conn)
        # else: a transport is being set up; _connect aborts it

    def _ended(self, conn: _Connection) -> None:
        conn.closed = True
        if conn in self._connections:
            del self._connections[conn]
            host = _host(conn.peer)
            self._per_host[host] -= 1
            if self._per_host[host] <= 0:
                del self._per_host[host]
        self._idle.pop(conn, None)
        if conn.handler is not None:
            self._by_handler.pop(conn.handler, None)
        if self._paused_for == "full":
            self._paused_for = None
            self._resume()

    @property
    def connections(self) -> int:
        """Connections open now, whatever their state."""
        return len(self._connections)

    def close(self) -> None:
        """Stop accepting and close the connections aiohttp does not know yet."""
        self._closing = True
        self._pause("closed")
        for handle in (self._retry, self._sweeper):
            if handle is not None:
                handle.cancel()
        for sock in self.sockets:
            sock.close()
        for conn in list(self._connections):
            if conn.requests == 0:
                self._close(conn)

    def abort_all(self) -> None:
        """After a graceful shutdown: whatever is still open goes."""
        for conn in list(self._connections):
            self._close(conn)
