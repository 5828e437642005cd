"""The ``podresources-exporter`` command: its flags, their environment twins, dispatch.

Every flag is declared once, in ``FLAGS``: name, value check, default, help and the commands that
take it; the argparse parsers and the environment lookup are both built from that table. Each
flag has an environment-variable twin, ``PODRESOURCES_EXPORTER_<FLAG>`` (upper case, dashes as
underscores); a flag on the command line wins over its twin. A bad value, from either, exits
with status 2 and a one-line reason. What each command then builds and runs is in
:mod:`exporter.commands` (one module per command).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__
from .commands.demo import demo, simulate
from .commands.serve import PROG, UsageError, load_web_config, serve
from .commands.snapshot import snapshot
from .exposition.rendering import RenderOptions
from .kubelet import client as kubelet
from .logs import LEVELS, setup_logging
from .refresh.settings import Settings

if TYPE_CHECKING:
    from .simulator.run import SimulateOptions

ENV_PREFIX = "PODRESOURCES_EXPORTER_"
# Outside 9100-9999 (full) and away from other software's defaults; docs/deploy.md says why.
DEFAULT_PORT = 10075

SERVE, SNAPSHOT, DEMO, SIMULATE = "serve", "snapshot", "demo", "simulate"
SUBCOMMANDS = (
    (SNAPSHOT, "read the kubelet once and print the per-NUMA picture (a table, JSON, or the "
               "node map as SVG or HTML)"),
    (DEMO, "serve real /metrics from the built-in kubelet simulator (no cluster needed)"),
    (SIMULATE, "run the kubelet simulator alone"),
)


# ---- value checks -------------------------------------------------------------------------

def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of 0 or more, got {text!r}")
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


def choice(*allowed: str) -> Callable[[str], str]:
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


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def driver_names(text: str) -> frozenset[str]:
    """A comma-separated list of DRA driver names (each a DNS subdomain, as the API requires
    of a driver); empty: none."""
    names = frozenset(part.strip() for part in text.split(",") if part.strip())
    for name in sorted(names):
        if len(name) > 63 or not _DNS_SUBDOMAIN.match(name):
            raise argparse.ArgumentTypeError(
                f"{name!r} is not a DRA driver name (a DNS subdomain of at most 63 characters, "
                "such as dra.cpu)")
    return names


def switch(text: str) -> bool:
    """An on/off flag's environment value."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


# ---- the flags ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Flag:
    """One command-line flag and its environment twin.

    ``parse`` checks a value (None: any text); a ``switch`` flag takes no value on the command
    line. ``group`` titles the flag's section of ``--help``. A flag named twice in the table
    means different things to different commands (the simulator serves the socket the exporter
    reads).
    """

    name: str
    commands: tuple[str, ...]
    help: str
    parse: Callable[[str], Any] | None = None
    default: Any = None
    group: str | None = None
    metavar: str | None = None
    required: bool = False
    hidden_in: tuple[str, ...] = ()  # accepted but left out of these commands' --help
    environ_fallback: str | None = None  # read when the twin is unset

    @property
    def dest(self) -> str:
        return self.name[2:].replace("-", "_")

    @property
    def environ(self) -> str:
        return ENV_PREFIX + self.dest.upper()


_LOOP = Settings()  # the refresh loop's defaults are the flags' defaults
_EXPORTER = (SERVE, SNAPSHOT, DEMO)
_SERVING = (SERVE, DEMO)
KUBELET, LOGGING, SERVING = "kubelet and node", "logging", "serving"
FIT = "fit and explain"
POD_CONTEXT = "pod context"

FLAGS: tuple[Flag, ...] = (
    # ---- snapshot ----
    Flag("--format", (SNAPSHOT,), "table, json, or the node map as svg or html (default: "
         "%(default)s)", choice("table", "json", "svg", "html"), "table"),
    # ---- the simulator (demo and simulate) ----
    Flag("--profile", (DEMO, SIMULATE), "simulator profile: a bundled profile's name or the path "
         "to a profile .json (default: %(default)s)", None, "dual-socket-gpu"),
    Flag("--socket", (SIMULATE,), "unix socket to serve the podresources API on",
         socket_address, required=True),
    Flag("--pods-api-socket", (SIMULATE,), "also serve the kubelet's Pods API on this unix "
         "socket (off when unset)", socket_address, None, metavar="PATH"),
    Flag("--sysfs-root", (SIMULATE,), "write a matching fake sysfs tree here"),
    Flag("--control-address", (DEMO, SIMULATE), "HTTP endpoint to misbehave the simulated "
         "kubelet: rate-limit storms, restarts, garbage (off when unset; see docs/simulator.md)",
         listen_address, None, metavar="HOST:PORT"),
    Flag("--churn-interval", (DEMO, SIMULATE),
         "replace pods every SECONDS (default: no churn)", positive_float, None,
         metavar="SECONDS"),
    Flag("--churn-pods", (SIMULATE,), "pods replaced per churn step (default: %(default)s)",
         non_negative_int, 1),
    Flag("--state-dir", (SIMULATE,), "keep kubelet-like state files here, rewritten on every "
         "change (for the exporter's --watch-path)", None, None, metavar="DIR"),
    Flag("--seed", (SIMULATE,), "random seed for allocation order and churn", non_negative_int),
    # device plugins register again this long after a kubelet restart
    # (exporter.simulator.node.server.DEFAULT_REREGISTER_SECONDS)
    Flag("--reregister-seconds", (SIMULATE,), "after a restart (POST /restart), device plugins "
         "register again this many seconds later; until then GetAllocatableResources lists none "
         "of their devices (default: %(default)s)", non_negative_float, 3.0),
    # the kubelet's own rate limit (exporter.simulator.node.faults.DEFAULT_QPS, DEFAULT_BURST)
    Flag("--qps", (SIMULATE,), "rate limit, calls per second (default: %(default)s)",
         positive_float, 100.0),
    Flag("--burst", (SIMULATE,), "rate limit burst (default: %(default)s)", non_negative_int,
         10),
    # ---- what the exporter reads ----
    Flag("--socket", _EXPORTER, "kubelet podresources socket; unix:// prefix accepted "
         "(default: %(default)s)", socket_address, _LOOP.socket, KUBELET),
    Flag("--sysfs-root", _EXPORTER, "where devices/system/node is read (default: %(default)s)",
         None, _LOOP.sysfs_root, KUBELET),
    Flag("--max-message-bytes", _EXPORTER,
         "gRPC receive limit for kubelet replies (default: %(default)s)", message_size,
         _LOOP.max_message_bytes, KUBELET),
    Flag("--timeout", _EXPORTER, "deadline of each kubelet call, seconds (default: %(default)s)",
         positive_float, _LOOP.timeout, KUBELET),
    Flag("--node-name", _EXPORTER,
         "node name for podresources_node_info (default: $NODE_NAME)", None, _LOOP.node_name,
         KUBELET, environ_fallback="NODE_NAME"),  # the downward-API variable the chart sets
    Flag("--dra-cpu-drivers", _EXPORTER, "DRA drivers whose devices are exclusive CPUs, "
         "comma-separated; empty for none (default: "
         f"{','.join(sorted(_LOOP.dra_cpu_drivers))}, dra-driver-cpu)", driver_names,
         _LOOP.dra_cpu_drivers, KUBELET, "DRIVERS"),
    # ---- logging, every command ----
    Flag("--log-format", (*_EXPORTER, SIMULATE), "text or json (default: %(default)s)",
         choice("text", "json"), "text", LOGGING),
    Flag("--log-level", (*_EXPORTER, SIMULATE), f"{', '.join(LEVELS)} (default: %(default)s)",
         choice(*LEVELS), "info", LOGGING),
    # ---- serving /metrics ----
    Flag("--listen-address", (SERVE,),
         f"HTTP listener; port 0 picks a free port (default: :{DEFAULT_PORT})", listen_address,
         ("", DEFAULT_PORT), SERVING, "HOST:PORT"),
    # the demo is tried on laptops and shared machines: this machine only, unless told otherwise
    Flag("--listen-address", (DEMO,), "HTTP listener; port 0 picks a free port; :PORT listens "
         f"on every interface (default: localhost:{DEFAULT_PORT}, this machine only)",
         listen_address, ("localhost", DEFAULT_PORT), SERVING, "HOST:PORT"),
    Flag("--interval", _SERVING, "seconds between List calls (default: %(default)s)",
         positive_float, _LOOP.interval, SERVING),
    Flag("--allocatable-interval", _SERVING,
         "seconds between GetAllocatableResources calls (default: %(default)s)", positive_float,
         _LOOP.allocatable_interval, SERVING),
    Flag("--watch-path", _SERVING, "refresh soon after the kubelet's state files under DIR "
         "change (e.g. /var/lib/kubelet); off when unset", None, _LOOP.watch_path, SERVING,
         "DIR"),
    Flag("--max-refresh-rate", _SERVING,
         "ceiling on refreshes triggered by --watch-path (default: %(default)s)", positive_float,
         _LOOP.max_refresh_rate, SERVING, "PER_SECOND"),
    Flag("--no-workload-metrics", (*_SERVING, SNAPSHOT),
         "drop the per-container and per-pod series", switch, False, SERVING,
         hidden_in=(SNAPSHOT,)),
    Flag("--no-device-info", _SERVING,
         "drop podresources_device_info and podresources_dra_device_info", switch, False,
         SERVING),
    Flag("--kube-api", (*_SERVING, SNAPSHOT), "add the Kubernetes-API view: extended "
         "resources, their staleness and DRA capacity of this node, and pod context where the "
         "kubelet has no Pods API; needs the node name and RBAC (in-cluster config, or "
         "$KUBECONFIG when set)", switch, _LOOP.kube_api, POD_CONTEXT),
    Flag("--pods-api-socket", (SERVE, SNAPSHOT), "the kubelet's Pods API socket, the source of "
         "pod context (QoS, requests, admission rejections) while it exists; unix:// prefix "
         "accepted (default: %(default)s)", socket_address, _LOOP.pods_api_socket, POD_CONTEXT,
         "PATH"),
    Flag("--no-pods-api", (SERVE, SNAPSHOT), "never read the kubelet's Pods API (pod context "
         "then comes from --kube-api, or there is none)", switch, not _LOOP.pods_api,
         POD_CONTEXT),
    Flag("--no-numa-page", _SERVING, "do not serve /numa, the node map page", switch, False,
         SERVING),
    Flag("--web-config-file", _SERVING, "TLS and basic auth, in the Prometheus exporter-toolkit "
         "web-config format; /healthz and /readyz need no credentials (off when unset)", None,
         None, SERVING, "PATH"),
    # ---- fit and explain (SPEC section 7) ----
    Flag("--fit-shapes", _EXPORTER, "YAML file of named pod shapes (shapes: {NAME: {cpu: 8, "
         "memory: 64Gi, nvidia.com/gpu: 2}}) for the podresources_shape_* answers; re-read on "
         "change (off when unset)", None, _LOOP.fit_shapes, FIT, "FILE"),
    Flag("--full-pcpus-only", _EXPORTER, "the CPU manager option full-pcpus-only is on: CPU "
         "requests not a multiple of the threads per core, or beyond the free physical cores, "
         "are rejected (SMTAlignmentError; also read from --kubelet-config)", switch,
         _LOOP.full_pcpus_only, FIT),
    Flag("--kubelet-config", _EXPORTER, "the kubelet's config file (e.g. "
         "/var/lib/kubelet/config.yaml), read for Topology Manager policy and scope and CPU "
         "manager options (off when unset)", None, _LOOP.kubelet_config, FIT, "PATH"),
    Flag("--topology-manager-policy", _EXPORTER, "the kubelet's Topology Manager policy "
         "(none, best-effort, restricted or single-numa-node), when its config file cannot be "
         "mounted; overrides --kubelet-config (default: the file's, else single-numa-node)",
         choice("none", "best-effort", "restricted", "single-numa-node"),
         _LOOP.topology_manager_policy, FIT, "POLICY"),
    Flag("--topology-manager-scope", _EXPORTER, "the kubelet's Topology Manager scope "
         "(container or pod); overrides --kubelet-config (default: the file's, else "
         "container)", choice("container", "pod"), _LOOP.topology_manager_scope, FIT, "SCOPE"),
    Flag("--shape", (SNAPSHOT,), "would the kubelet admit one pod of this shape, and where: a "
         "shape's name from --fit-shapes, or RESOURCE=QUANTITY,... for one container (e.g. "
         "cpu=8,nvidia.com/gpu=2,memory=64Gi)", None, None, FIT, "SHAPE"),
    Flag("--why", (SNAPSHOT,), "why was this pod rejected at admission: NAMESPACE/POD, read "
         "from the kubelet's Pods API, else from the Kubernetes API (in-cluster config, or "
         "$KUBECONFIG)", None, None, FIT, "NAMESPACE/POD"),
)


# ---- parser -------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, status 2
        raise UsageError(message)


_UNSET = object()


def _from_environment(flag: Flag, environ: Mapping[str, str]) -> Any:
    """The value of the flag's environment twin, checked like the flag's; ``_UNSET`` if none."""
    name = flag.environ
    if name not in environ and flag.environ_fallback is not None:
        name = flag.environ_fallback
    if name not in environ:
        return _UNSET
    if flag.parse is None:
        return environ[name]
    try:
        return flag.parse(environ[name])
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"{name}: {error}") from None


def _add_flags(parser: argparse.ArgumentParser, command: str,
               environ: Mapping[str, str]) -> None:
    """The command's flags, in table order; an environment twin replaces a flag's default."""
    flags = [flag for flag in FLAGS if command in flag.commands]
    titles = dict.fromkeys(flag.group for flag in flags if flag.group is not None)
    groups = {title: parser.add_argument_group(title) for title in titles}
    for flag in flags:
        value = _from_environment(flag, environ)
        options: dict[str, Any] = {
            "default": flag.default if value is _UNSET else value,
            "help": argparse.SUPPRESS if command in flag.hidden_in else flag.help,
        }
        if flag.parse is switch:
            options["action"] = "store_true"
        else:
            options.update(type=flag.parse, metavar=flag.metavar,
                           required=flag.required and value is _UNSET)
        target = parser if flag.group is None else groups[flag.group]
        target.add_argument(flag.name, **options)


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The command's parser; ``environ`` (default: none) supplies the environment twins."""
    environ = {} if environ is None else environ
    parser = _Parser(
        prog=PROG,
        description="Prometheus exporter for per-NUMA use of the kubelet's exclusive CPUs, "
                    "memory, hugepages, devices and DRA devices. Without a command it serves "
                    "/metrics (the DaemonSet's mode).",
        epilog=f"Every flag can also be set as an environment variable {ENV_PREFIX}<FLAG>, "
               f"e.g. {ENV_PREFIX}INTERVAL=30.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_flags(parser, SERVE, environ)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command, help_text in SUBCOMMANDS:
        _add_flags(commands.add_parser(command, help=help_text), command, environ)
    return parser


def _takes_value(option: str) -> bool | None:
    """Whether a command-line option (a flag's name, or a prefix argparse would accept for
    it) is followed by a value; None when no flag goes by that name."""
    names = {flag.name: flag.parse is not switch for flag in FLAGS}
    names.update({"--help": False, "-h": False, "--version": False})
    if option in names:
        return names[option]
    candidates = {takes for name, takes in names.items()
                  if option.startswith("--") and name.startswith(option)}
    return candidates.pop() if len(candidates) == 1 else None


def _scan(argv: Sequence[str]) -> tuple[int | None, list[str]]:
    """(where the command is in ``argv``, or None; the options given, by full name)."""
    commands = {command for command, _ in SUBCOMMANDS}
    given: list[str] = []
    position = 0
    while position < len(argv):
        token = argv[position]
        if token == "--":
            break
        if token.startswith("-") and token != "-":
            option, has_value, _ = token.partition("=")
            full = [f.name for f in FLAGS if f.name == option or
                    (option.startswith("--") and f.name.startswith(option))]
            if len(set(full)) == 1:
                given.append(full[0])
            if not has_value and _takes_value(option):
                position += 1  # the option's value, whatever it looks like
        elif token in commands:
            return position, given
        else:
            return None, given  # a stray argument: argparse says what is wrong with it
        position += 1
    return None, given


def parse_args(argv: Sequence[str] | None = None,
               environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """The parsed command line. Flags may come before or after the command: argparse alone
    would read those before it as the serve command's and then let the command's defaults
    overwrite them, silently (``--socket S snapshot`` reading the default socket). So the
    command is moved to the front first; a flag the command does not take is then refused.

    ``given_flags`` on the result names the flags set on the command line or by their
    environment twins (so a command can tell a chosen value from a default).
    """
    environ = os.environ if environ is None else environ
    tokens = list(sys.argv[1:] if argv is None else argv)
    where, given = _scan(tokens)
    if where is not None and where > 0:
        tokens = [tokens[where], *tokens[:where], *tokens[where + 1:]]
    args = build_parser(environ).parse_args(tokens)
    from_environment = {flag.name for flag in FLAGS if flag.environ in environ or (
        flag.environ_fallback is not None and flag.environ_fallback in environ)}
    args.given_flags = frozenset(given) | from_environment
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    """The refresh loop's settings from the parsed flags (a flag the command does not take
    keeps the loop's default)."""
    given = vars(args)
    values: dict[str, Any] = {f.name: given[f.name] for f in fields(Settings) if f.name in given}
    values["render"] = RenderOptions(workload_metrics=not given.get("no_workload_metrics"),
                                     device_info=not given.get("no_device_info"))
    values["pods_api"] = not given.get("no_pods_api", not _LOOP.pods_api)
    return Settings(**values)


# ---- dispatch -----------------------------------------------------------------------------

def _simulate_options(args: argparse.Namespace) -> SimulateOptions:
    from .simulator.run import SimulateOptions  # the simulator only for its commands

    return SimulateOptions(
        profile=args.profile, socket_path=kubelet.socket_path(args.socket),
        pods_api_socket=(kubelet.socket_path(args.pods_api_socket) if args.pods_api_socket
                         else None),
        sysfs_root=args.sysfs_root, control_address=args.control_address,
        churn_interval=args.churn_interval, churn_pods=args.churn_pods,
        state_dir=args.state_dir, seed=args.seed, qps=args.qps, burst=args.burst,
        reregister_seconds=args.reregister_seconds)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        setup_logging(args.log_level, args.log_format)
        if args.command == SNAPSHOT:
            return asyncio.run(snapshot(settings_from(args), args.format, args.log_level,
                                        shape=args.shape, why=args.why,
                                        sysfs_given="--sysfs-root" in args.given_flags))
        if args.command == DEMO:
            return asyncio.run(demo(settings_from(args), args.listen_address, args.profile,
                                    args.churn_interval, args.control_address,
                                    args.web_config_file, numa_page=not args.no_numa_page))
        if args.command == SIMULATE:
            return asyncio.run(simulate(_simulate_options(args)))
        return asyncio.run(serve(settings_from(args), args.listen_address,
                                 web_config=load_web_config(args.web_config_file),
                                 numa_page=not args.no_numa_page))
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
