"""The HTTP listener under abuse: silent, slow and non-reading clients, a full house, no fds.

Each test runs the real listener and aiohttp on loopback with timeouts shortened through
``Limits``; assertions are about what happens (closed, answered, logged once), never how fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import resource
import socket
import ssl
import time

import pytest
from aiohttp import web

from exporter.web import listener as listener_module
from exporter.web.listener import Limits
from exporter.web.server import start_http

from ..support.pki import CA

SHORT = Limits(max_connections=100, request_timeout=1.0, idle_timeout=1.0,
               tls_handshake_timeout=1.0, write_timeout=1.0, accept_retry=0.2)
REQUEST = b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"


def small_app() -> web.Application:
    async def ok(request):
        return web.Response(text="ok\n")

    async def big(request):  # far more than loopback's socket buffers hold
        return web.Response(body=b"x" * (48 << 20))

    app = web.Application()
    app.router.add_get("/ok", ok)
    app.router.add_get("/big", big)
    return app


@contextlib.asynccontextmanager
async def serving(limits: Limits = SHORT, ssl_context=None):
    server, port = await start_http(small_app(), "127.0.0.1", 0, ssl_context, limits)
    try:
        yield server, port
    finally:
        await server.cleanup()


async def closed_by_peer(reader: asyncio.StreamReader, within: float = 15.0) -> bool:
    """Whether the exporter closes the connection (EOF or reset) before ``within`` seconds."""
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            data = await asyncio.wait_for(reader.read(65536), deadline - time.monotonic())
            if not data:
                return True
    except (ConnectionError, asyncio.IncompleteReadError):
        return True
    except TimeoutError:
        return False
    return False


async def wait_until(predicate, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_silent_connections_are_closed_and_cost_no_parser():
    async with serving() as (server, port):
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(20)]
        assert await wait_until(lambda: server.listener.connections == 20)
        assert server.runner.server.connections == []  # no aiohttp protocol for any of them
        closed = await asyncio.gather(*(closed_by_peer(reader) for reader, _ in streams))
        assert all(closed)
        assert await wait_until(lambda: server.listener.connections == 0)
        for _, writer in streams:
            writer.close()


async def test_slowloris_and_idle_keep_alive_connections_are_closed():
    async with serving() as (_server, port):
        slow_reader, slow_writer = await asyncio.open_connection("127.0.0.1", port)
        slow_writer.write(b"GET /ok HTTP/1.1\r\n")

        async def trickle():
            with contextlib.suppress(ConnectionError):
                for _ in range(40):  # one header byte every 0.2 s: never a whole request
                    await asyncio.sleep(0.2)
                    slow_writer.write(b"X")
                    await slow_writer.drain()

        trickler = asyncio.create_task(trickle())
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
        idle_writer.write(REQUEST)  # answered, then the connection idles in keep-alive
        assert b"200 OK" in await asyncio.wait_for(idle_reader.readuntil(b"ok\n"), 5)
        assert await closed_by_peer(slow_reader)
        assert await closed_by_peer(idle_reader)
        trickler.cancel()
        for writer in (slow_writer, idle_writer):
            writer.close()


async def test_at_the_limit_a_new_client_displaces_the_longest_idle(caplog):
    caplog.set_level(logging.INFO, logger="exporter.web.listener")
    limits = Limits(max_connections=4, request_timeout=60, idle_timeout=60, accept_retry=0.2)
    async with serving(limits) as (server, port):
        silent = []
        for _ in range(4):
            silent.append(await asyncio.open_connection("127.0.0.1", port))
            await wait_until(lambda: server.listener.connections == len(silent))
        scrapers = []
        for _ in range(3):  # each scrape arrives at a full house and is still answered
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REQUEST)
            assert b"200 OK" in await asyncio.wait_for(reader.readuntil(b"ok\n"), 5)
            scrapers.append((reader, writer))  # kept alive: idle since its answer
        # the three oldest silent connections made room, the newest is still open
        assert [await closed_by_peer(r, within=2) for r, _ in silent] == [True, True, True,
                                                                          False]
        assert server.listener.connections == 4
        for _, writer in silent + scrapers:
            writer.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["HTTP: 4 connections open, the limit; closing the longest idle ones "
                        "to admit new ones"]


async def test_a_client_that_stops_reading_is_dropped():
    async with serving() as (server, port):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        await asyncio.get_running_loop().sock_sendall(sock, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await wait_until(lambda: server.listener.connections == 1)
        # never read: the response stalls in the exporter's buffers until it gives up
        assert await wait_until(lambda: server.listener.connections == 0)
        sock.close()


async def test_silent_tls_connections_get_no_tls_state_and_are_closed(tmp_path):
    ca = CA(tmp_path, "ca")
    cert, key = ca.issue("server")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async with serving(ssl_context=context) as (server, port):
        streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
        assert await wait_until(lambda: server.listener.connections == 30)
        gc.collect()
        tls_protocols = [o for o in gc.get_objects() if isinstance(o, listener_module._TLSProtocol)]
        assert tls_protocols == []
        # a real client still gets through, with a TLS read buffer sized for TLS records
        client = ssl.create_default_context(cafile=ca.path)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.write(REQUEST)
        assert b"200 OK" in await asyncio.wait_for(reader.readuntil(b"ok\n"), 5)
        protocols = [o for o in gc.get_objects() if isinstance(o, listener_module._TLSProtocol)]
        assert len(protocols) == 1 and len(protocols[0]._ssl_buffer) == 32 * 1024
        writer.close()
        # a half-started handshake is given up on, and the silent ones are closed
        stalled_reader, stalled_writer = await asyncio.open_connection("127.0.0.1", port)
        stalled_writer.write(b"\x16\x03\x01\x02\x00")
        assert await closed_by_peer(stalled_reader)
        assert all(await asyncio.gather(*(closed_by_peer(r) for r, _ in streams)))
        for _, w in [*streams, (None, stalled_writer)]:
            w.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_out_of_file_descriptors_is_logged_once_and_survived(caplog):
    caplog.set_level(logging.INFO, logger="exporter.web.listener")
    async with serving() as (server, port):
        clients = [socket.socket() for _ in range(5)]
        for client in clients:
            client.setblocking(False)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        fillers = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (_open_fds() + 16, hard))
        try:
            with contextlib.suppress(OSError):
                while True:
                    fillers.append(os.open("/dev/null", os.O_RDONLY))
            for client in clients:  # connect(2) needs no new descriptor; accept(2) does
                with contextlib.suppress(BlockingIOError):
                    client.connect(("127.0.0.1", port))
            await asyncio.sleep(1.5)  # several retries, all failing
        finally:
            for fd in fillers:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert await wait_until(lambda: server.listener.connections == 5)
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(clients[0], REQUEST)
        answer = await asyncio.wait_for(loop.sock_recv(clients[0], 200), 5)
        assert answer.startswith(b"HTTP/1.1 200 OK")
        for client in clients:
            client.close()
    messages = [(r.levelname, r.getMessage()) for r in caplog.records
                if r.name == "exporter.web.listener"]
    assert len(messages) == 2, messages
    assert messages[0][0] == "WARNING"
    assert messages[0][1].startswith("HTTP: cannot accept connections: Too many open files")
    assert messages[1][0] == "INFO"
    assert messages[1][1].startswith("HTTP: accepting connections again (")


async def test_a_port_in_use_is_an_os_error_and_port_zero_binds_every_family():
    async with serving() as (_server, port):
        with pytest.raises(OSError) as raised:
            await start_http(small_app(), "127.0.0.1", port)
        assert "error while attempting to bind" in str(raised.value)
    all_interfaces, bound = await start_http(small_app(), "", 0)
    try:
        assert {address[1] for address in all_interfaces.addresses} == {bound}
    finally:
        await all_interfaces.cleanup()


async def test_a_client_that_spoke_just_before_a_flood_is_served_not_displaced():
    limits = Limits(max_connections=4, request_timeout=60, idle_timeout=60)
    async with serving(limits) as (_server, port):
        # Blocking calls, no await: the kernel queues all of them before the listener runs,
        # so the scraper is the oldest connection when the flood fills the house.
        scraper = socket.create_connection(("127.0.0.1", port))
        scraper.sendall(REQUEST)
        flood = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
        scraper.setblocking(False)
        answer = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(scraper, 200), 5)
        assert answer.startswith(b"HTTP/1.1 200 OK")
        for sock in [scraper, *flood]:
            sock.close()


async def test_at_the_limit_the_address_holding_most_connections_gives_one_up():
    """A scraper's idle keep-alive connection from another address outlives a flood of
    connections from one address, though it has been idle the longest."""
    limits = Limits(max_connections=4, request_timeout=60, idle_timeout=60)
    async with serving(limits) as (server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                       local_addr=("127.0.0.2", 0))
        writer.write(REQUEST)
        assert b"200 OK" in await asyncio.wait_for(reader.readuntil(b"ok\n"), 5)
        flood = []
        for _ in range(10):  # each speaks, is answered and stays idle: keep-alive
            flood_reader, flood_writer = await asyncio.open_connection("127.0.0.1", port)
            flood_writer.write(REQUEST)
            assert b"200 OK" in await asyncio.wait_for(flood_reader.readuntil(b"ok\n"), 5)
            flood.append((flood_reader, flood_writer))
        writer.write(REQUEST)  # the same connection, idle since the start
        assert b"200 OK" in await asyncio.wait_for(reader.readuntil(b"ok\n"), 5)
        assert server.listener.connections == 4
        # the flood's oldest gave way to its newest
        assert [await closed_by_peer(r, within=1) for r, _ in flood[:7]] == [True] * 7
        for _, flood_writer in [*flood, (reader, writer)]:
            flood_writer.close()
