"""The ``podresources-exporter`` command: serve (default), snapshot, demo, simulate.

Every flag has an environment-variable twin, ``PODRESOURCES_EXPORTER_<FLAG>`` (upper case,
dashes as underscores); a flag on the command line wins over its twin. A bad value, from either,
exits with status 2 and a one-line reason.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__, kubelet
from .health import Health
from .logs import LEVELS, setup_logging
from .refresh import Refresher, Settings
from .rendering import RenderOptions
from .server import make_app, start_http
from .topology import TopologyError, read_topology

if TYPE_CHECKING:
    from . import webconfig

log = logging.getLogger(__name__)

PROG = "podresources-exporter"
ENV_PREFIX = "PODRESOURCES_EXPORTER_"
# Outside 9100-9999 (full) and away from other software's defaults; CHANGELOG.md says why.
DEFAULT_PORT = 10075
SHUTDOWN_SECONDS = 5.0


class UsageError(Exception):
    """A bad flag or environment value: exit status 2."""


# ---- value checks -------------------------------------------------------------------------

def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def message_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {text!r}") from None
    if value < 4096 or value > 2**31 - 1:
        raise argparse.ArgumentTypeError(f"must be between 4096 and {2**31 - 1} bytes, got {text}")
    return value


def listen_address(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT or :PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port in {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range in {text!r}")
    return host, port


def socket_address(text: str) -> str:
    try:
        kubelet.socket_target(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def choice(*allowed: str):
    def check(text: str) -> str:
        value = text.lower()
        if value not in allowed:
            raise argparse.ArgumentTypeError(f"must be one of {', '.join(allowed)}, got {text!r}")
        return value
    return check


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


# ---- parser -------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, status 2
        raise UsageError(message)


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("kubelet and node")
    group.add_argument("--socket", type=socket_address, default=kubelet.DEFAULT_SOCKET,
                       help="kubelet podresources socket; unix:// prefix accepted "
                            "(default: %(default)s)")
    group.add_argument("--sysfs-root", default="/sys",
                       help="where devices/system/node is read (default: %(default)s)")
    group.add_argument("--max-message-bytes", type=message_size,
                       default=kubelet.DEFAULT_MAX_MESSAGE_BYTES,
                       help="gRPC receive limit for kubelet replies (default: %(default)s)")
    group.add_argument("--timeout", type=positive_float, default=kubelet.DEFAULT_TIMEOUT_SECONDS,
                       help="deadline of each kubelet call, seconds (default: %(default)s)")
    group.add_argument("--node-name", default="",
                       help="node name for podresources_node_info (default: $NODE_NAME)")
    logs = parser.add_argument_group("logging")
    logs.add_argument("--log-format", type=choice("text", "json"), default="text",
                      help="text or json (default: %(default)s)")
    logs.add_argument("--log-level", type=choice(*LEVELS), default="info",
                      help=f"{', '.join(LEVELS)} (default: %(default)s)")


def _serving(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("serving")
    group.add_argument("--listen-address", type=listen_address, default=("", DEFAULT_PORT),
                       metavar="HOST:PORT",
                       help=f"HTTP listener; port 0 picks a free port (default: :{DEFAULT_PORT})")
    group.add_argument("--interval", type=positive_float, default=10.0,
                       help="seconds between List calls (default: %(default)s)")
    group.add_argument("--allocatable-interval", type=positive_float, default=60.0,
                       help="seconds between GetAllocatableResources calls (default: %(default)s)")
    group.add_argument("--watch-path", default=None, metavar="DIR",
                       help="refresh soon after the kubelet's state files under DIR change "
                            "(e.g. /var/lib/kubelet); off when unset")
    group.add_argument("--max-refresh-rate", type=positive_float, default=1.0,
                       metavar="PER_SECOND",
                       help="ceiling on refreshes triggered by --watch-path (default: %(default)s)")
    group.add_argument("--no-workload-metrics", action="store_true",
                       help="drop the per-container and per-pod series")
    group.add_argument("--no-device-info", action="store_true",
                       help="drop podresources_device_info and podresources_dra_device_info")
    group.add_argument("--kube-api", action="store_true",
                       help="add the Kubernetes-API view: extended resources, their staleness "
                            "and DRA capacity of this node; needs the node name and RBAC "
                            "(in-cluster config, or $KUBECONFIG when set)")
    group.add_argument("--web-config-file", default=None, metavar="PATH",
                       help="TLS and basic auth, in the Prometheus exporter-toolkit web-config "
                            "format; /healthz and /readyz need no credentials (off when unset)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Prometheus exporter for per-NUMA use of the kubelet's exclusive CPUs, "
                    "memory, hugepages, devices and DRA devices. Without a command it serves "
                    "/metrics (the DaemonSet's mode).",
        epilog=f"Every flag can also be set as an environment variable {ENV_PREFIX}<FLAG>, "
               f"e.g. {ENV_PREFIX}INTERVAL=30.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _common(parser)
    _serving(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    snapshot = commands.add_parser("snapshot", help="read the kubelet once and print the "
                                                    "per-NUMA picture")
    snapshot.add_argument("--format", type=choice("table", "json"), default="table",
                          help="table or json (default: %(default)s)")
    _common(snapshot)
    snapshot.add_argument("--no-workload-metrics", action="store_true", help=argparse.SUPPRESS)

    demo = commands.add_parser("demo", help="serve real /metrics from the built-in kubelet "
                                            "simulator (no cluster needed)")
    demo.add_argument("--profile", default="dual-socket-gpu",
                      help="simulator profile (default: %(default)s)")
    demo.add_argument("--churn-interval", type=positive_float, default=None, metavar="SECONDS",
                      help="replace pods every SECONDS (default: no churn)")
    demo.add_argument("--control-address", type=listen_address, default=None,
                      metavar="HOST:PORT",
                      help="HTTP endpoint to misbehave the simulated kubelet: rate-limit storms, "
                           "restarts, garbage (off when unset; see the README)")
    _common(demo)
    _serving(demo)

    simulate = commands.add_parser("simulate", help="run the kubelet simulator alone")
    simulate.add_argument("--profile", default="dual-socket-gpu",
                          help="bundled profile name or path to a profile .json "
                               "(default: %(default)s)")
    simulate.add_argument("--socket", type=socket_address, required=True,
                          help="unix socket to serve the podresources API on")
    simulate.add_argument("--sysfs-root", default=None,
                          help="write a matching fake sysfs tree here")
    simulate.add_argument("--control-address", type=listen_address, default=None,
                          metavar="HOST:PORT",
                          help="HTTP control endpoint for fault switches (off when unset)")
    simulate.add_argument("--churn-interval", type=positive_float, default=None,
                          metavar="SECONDS", help="replace pods every SECONDS")
    simulate.add_argument("--churn-pods", type=non_negative_int, default=1,
                          help="pods replaced per churn step (default: %(default)s)")
    simulate.add_argument("--state-dir", default=None, metavar="DIR",
                          help="keep kubelet-like state files here, rewritten on every change "
                               "(for the exporter's --watch-path)")
    simulate.add_argument("--seed", type=non_negative_int, default=None,
                          help="random seed for allocation order and churn")
    simulate.add_argument("--qps", type=positive_float, default=100.0,
                          help="rate limit, calls per second (default: %(default)s)")
    simulate.add_argument("--burst", type=non_negative_int, default=10,
                          help="rate limit burst (default: %(default)s)")
    logs = simulate.add_argument_group("logging")
    logs.add_argument("--log-format", type=choice("text", "json"), default="text")
    logs.add_argument("--log-level", type=choice(*LEVELS), default="info")
    return parser


def _apply_environment(parser: argparse.ArgumentParser, environ) -> None:
    """Use ``PODRESOURCES_EXPORTER_<FLAG>`` as the default of ``--flag``, checked alike."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = [parser] + [p for s in subparsers for p in s.choices.values()]
    for each in parsers:
        for action in each._actions:
            flags = [s for s in action.option_strings if s.startswith("--")]
            if not flags or action.dest in ("help", "version"):
                continue
            name = ENV_PREFIX + flags[0][2:].upper().replace("-", "_")
            if name not in environ and action.dest == "node_name" and "NODE_NAME" in environ:
                name = "NODE_NAME"  # the downward-API variable the chart sets
            if name not in environ:
                continue
            raw = environ[name]
            if isinstance(action, argparse._StoreTrueAction):
                text = raw.strip().lower()
                if text in ("1", "true", "yes", "on"):
                    value = True
                elif text in ("", "0", "false", "no", "off"):
                    value = False
                else:
                    raise UsageError(f"{name}: expected true or false, got {raw!r}")
            elif action.type is not None:
                try:
                    value = action.type(raw)
                except argparse.ArgumentTypeError as error:
                    raise UsageError(f"{name}: {error}") from None
            else:
                value = raw
            action.default = value
            action.required = False


def parse_args(argv: list[str] | None = None, environ=None) -> argparse.Namespace:
    parser = build_parser()
    _apply_environment(parser, os.environ if environ is None else environ)
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace, **overrides) -> Settings:
    values = dict(
        socket=args.socket,
        sysfs_root=args.sysfs_root,
        interval=getattr(args, "interval", 10.0),
        allocatable_interval=getattr(args, "allocatable_interval", 60.0),
        watch_path=getattr(args, "watch_path", None),
        max_refresh_rate=getattr(args, "max_refresh_rate", 1.0),
        max_message_bytes=args.max_message_bytes,
        timeout=args.timeout,
        node_name=args.node_name,
        kube_api=getattr(args, "kube_api", False),
        render=RenderOptions(workload_metrics=not getattr(args, "no_workload_metrics", False),
                             device_info=not getattr(args, "no_device_info", False)),
    )
    values.update(overrides)
    return Settings(**values)


# ---- commands -----------------------------------------------------------------------------

def load_web_config(args: argparse.Namespace) -> webconfig.WebConfig | None:
    """The ``--web-config-file`` settings, checked before anything starts (bad: exit 2)."""
    if not getattr(args, "web_config_file", None):
        return None
    from . import webconfig  # noqa: F811 -- TLS and bcrypt only for those who configure them
    try:
        return webconfig.load(args.web_config_file)
    except webconfig.WebConfigError as error:
        raise UsageError(f"--web-config-file: {error}") from None


async def serve(settings: Settings, address: tuple[str, int],
                stop: asyncio.Event | None = None, started=None,
                web_config: webconfig.WebConfig | None = None) -> int:
    """Run the exporter until SIGTERM/SIGINT (or ``stop``); returns the exit status."""
    try:
        topology = read_topology(settings.sysfs_root)
    except TopologyError as error:
        raise UsageError(f"--sysfs-root: {error}") from None
    if settings.watch_path and not Path(settings.watch_path).exists():
        raise UsageError(f"--watch-path: {settings.watch_path} does not exist")
    stop = stop or asyncio.Event()
    refresher = _refresher(settings, topology)
    _install_signal_handlers(stop)
    host, port = address
    try:
        runner, bound = await start_http(
            make_app(refresher, web_config.middlewares() if web_config else ()), host, port,
            web_config.ssl_context() if web_config else None)
    except OSError as error:
        await refresher.client.close()
        log.error("cannot listen on %s:%d: %s", host or "*", port, error.strerror or error)
        return 1
    log.info("podresources-exporter %s listening on %s:%d; kubelet socket %s; %d NUMA nodes",
             __version__, host or "*", bound, refresher.client.target,
             len(topology.numa_nodes))
    if web_config is not None:
        log.info("web config %s: %s, basic auth %s", web_config.path,
                 "HTTPS" if web_config.tls else "plain HTTP",
                 f"for {len(web_config.users)} users" if web_config.users else "off")
    if started is not None:
        started(bound, refresher)
    loop_task = asyncio.create_task(refresher.run())
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([loop_task, stopper], return_when=asyncio.FIRST_COMPLETED)
    log.info("shutting down")
    refresher.stop()
    try:
        await asyncio.wait_for(asyncio.gather(loop_task, return_exceptions=True),
                               timeout=SHUTDOWN_SECONDS / 2)
    except asyncio.TimeoutError:
        loop_task.cancel()
    stopper.cancel()
    await refresher.client.close()
    await runner.cleanup()
    if loop_task.done() and not loop_task.cancelled() and loop_task.exception():
        log.error("refresh loop failed: %r", loop_task.exception())
        return 1
    return 0


def _refresher(settings: Settings, topology) -> Refresher:
    """The refresh loop, with the Kubernetes-API view if asked (bad setup: exit 2)."""
    if not settings.kube_api:
        return Refresher(settings, Health(settings.node_name), topology=topology)
    if not settings.node_name:
        raise UsageError("--kube-api needs the node name: set --node-name or NODE_NAME")
    from .kubeapi import ViewError
    try:
        return Refresher(settings, Health(settings.node_name), topology=topology)
    except ViewError as error:
        raise UsageError(f"--kube-api: {error}") from None


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass


async def snapshot(args: argparse.Namespace) -> int:
    from .report import format_json, format_table

    settings = settings_from(args)
    try:
        topology = read_topology(settings.sysfs_root)
    except TopologyError as error:
        raise UsageError(f"--sysfs-root: {error}") from None
    if args.log_level == "info":
        logging.getLogger().setLevel(logging.WARNING)  # the report is the output
    refresher = Refresher(settings, Health(settings.node_name), topology=topology)
    try:
        await refresher.refresh_once()
    finally:
        await refresher.client.close()
    if refresher.accounting is None:
        error = refresher.last_error
        print(f"{PROG}: cannot read the kubelet at {refresher.client.target}: "
              f"{error.code if error else ''} {error.details if error else ''}".rstrip(),
              file=sys.stderr)
        return 1
    formatter = format_json if args.format == "json" else format_table
    sys.stdout.write(formatter(refresher.accounting, refresher.topology,
                               refresher.health.capabilities, settings.node_name))
    return 0


async def demo(args: argparse.Namespace) -> int:
    from .simulator import NodeState, Simulator, write_sysfs

    spec = _profile(args.profile)
    workdir = Path(tempfile.mkdtemp(prefix="podresources-demo-"))
    try:
        sysfs = write_sysfs(spec, workdir / "sys")
        simulator = Simulator(NodeState(spec), workdir / "pod-resources" / "kubelet.sock")
        await simulator.start()
        control = await _start_control(simulator, args.control_address)
        churn = None
        if args.churn_interval:
            churn = asyncio.create_task(_churn(simulator, args.churn_interval, 1))
        settings = settings_from(args, socket=str(simulator.socket_path), sysfs_root=str(sysfs),
                                 node_name=args.node_name or spec.name)

        def announce(port: int, refresher: Refresher) -> None:
            log.info("demo: simulated node %s (%s profile) -> http://localhost:%d/metrics",
                     spec.name, args.profile, port)

        try:
            return await serve(settings, args.listen_address, started=announce,
                               web_config=load_web_config(args))
        finally:
            if churn is not None:
                churn.cancel()
            if control is not None:
                await control.cleanup()
            await simulator.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _profile(name: str):
    from .simulator import ProfileError, load_profile
    try:
        return load_profile(name)
    except ProfileError as error:
        raise UsageError(f"--profile: {error}") from None


async def _churn(simulator, interval: float, pods: int) -> None:
    while True:
        await asyncio.sleep(interval)
        gone, added = simulator.churn(pods)
        log.debug("churn: removed %s, added %s", gone, added)


async def _start_control(simulator, address: tuple[str, int] | None):
    """The simulator's HTTP control endpoint (fault switches, restarts, churn), if asked for."""
    if address is None:
        return None
    from aiohttp import web

    from .simulator.control import control_app

    runner = web.AppRunner(control_app(simulator), access_log=None)
    await runner.setup()
    host, port = address
    await web.TCPSite(runner, host or "127.0.0.1", port).start()
    log.info("simulator control endpoint on http://%s:%d/state (POST /faults, /restart, "
             "/churn, /health)", host or "127.0.0.1", runner.addresses[0][1])
    return runner


async def simulate(args: argparse.Namespace) -> int:
    from .simulator import NodeState, Simulator, write_sysfs

    spec = _profile(args.profile)
    if args.sysfs_root:
        write_sysfs(spec, args.sysfs_root)
    simulator = Simulator(NodeState(spec, seed=args.seed), kubelet.socket_path(args.socket),
                          qps=args.qps, burst=args.burst)
    await simulator.start()
    stop = asyncio.Event()
    _install_signal_handlers(stop)
    runner = await _start_control(simulator, args.control_address)
    tasks = []
    if args.churn_interval:
        tasks.append(asyncio.create_task(_churn(simulator, args.churn_interval, args.churn_pods)))
    if args.state_dir:
        tasks.append(asyncio.create_task(simulator.keep_state_files(args.state_dir)))
    log.info("simulating %s (%s): %d pods", spec.name, args.profile, len(simulator.state.pods))
    await stop.wait()
    for task in tasks:
        task.cancel()
    if runner is not None:
        await runner.cleanup()
    await simulator.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        setup_logging(args.log_level, args.log_format)
        if args.command == "snapshot":
            return asyncio.run(snapshot(args))
        if args.command == "demo":
            return asyncio.run(demo(args))
        if args.command == "simulate":
            return asyncio.run(simulate(args))
        return asyncio.run(serve(settings_from(args), args.listen_address,
                                 web_config=load_web_config(args)))
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
