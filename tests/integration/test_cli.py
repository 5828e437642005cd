"""The ``podresources-exporter`` command as a user runs it: flags, env twins, real processes."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import sys
import time

import aiohttp
import pytest

from exporter.cli import main, parse_args

from ..support.harness import (
    REPO,
    Node,
    Scrape,
    free_port,
    scrape_port_until,
    short_tmpdir,
    small_profile,
    terminate,
)


@pytest.mark.parametrize("argv, reason", [
    (["--interval", "-1"], "--interval: must be a positive number"),
    (["--interval", "soon"], "--interval: not a number"),
    (["--allocatable-interval", "0"], "--allocatable-interval: must be a positive number"),
    (["--listen-address", "10041"], "--listen-address: expected HOST:PORT"),
    (["--listen-address", ":70000"], "port out of range"),
    (["--socket", "relative/kubelet.sock"], "absolute path"),
    (["--max-message-bytes", "12"], "--max-message-bytes: must be between"),
    (["--log-level", "loud"], "--log-level: must be one of"),
    (["--log-format", "xml"], "--log-format: must be one of"),
    (["--max-refresh-rate", "nan"], "--max-refresh-rate"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["snapshot", "--format", "yaml"], "--format: must be one of"),
    (["--topology-manager-policy", "numa"], "--topology-manager-policy: must be one of"),
    (["--topology-manager-scope", "node"], "--topology-manager-scope: must be one of"),
    (["simulate", "--socket", "/tmp/k.sock", "--reregister-seconds", "-1"],
     "--reregister-seconds: must be a number of 0 or more"),
])
def test_bad_flag_values_exit_2_with_one_line(argv, reason, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("podresources-exporter: error: ")
    assert reason in err


def test_bad_environment_value_names_the_variable(capsys, monkeypatch):
    monkeypatch.setenv("PODRESOURCES_EXPORTER_INTERVAL", "zero")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "PODRESOURCES_EXPORTER_INTERVAL: not a number" in err


def test_bad_sysfs_root_exits_2(capsys, tmp_path):
    assert main(["--sysfs-root", str(tmp_path / "missing"), "--listen-address", ":0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--sysfs-root" in err


def test_unknown_profile_exits_2(capsys):
    assert main(["demo", "--profile", "tiny"]) == 2
    assert "unknown profile 'tiny'" in capsys.readouterr().err


def test_environment_twins_set_defaults_and_flags_win():
    env = {"PODRESOURCES_EXPORTER_INTERVAL": "30", "PODRESOURCES_EXPORTER_NO_DEVICE_INFO": "true",
           "PODRESOURCES_EXPORTER_SOCKET": "unix:///run/kubelet.sock",
           "PODRESOURCES_EXPORTER_LISTEN_ADDRESS": "127.0.0.1:9999"}
    args = parse_args([], environ=env)
    assert args.interval == 30.0
    assert args.no_device_info is True
    assert args.socket == "unix:///run/kubelet.sock"
    assert args.listen_address == ("127.0.0.1", 9999)
    assert parse_args(["--interval", "5"], environ=env).interval == 5.0
    assert parse_args(["snapshot"], environ=env).socket == "unix:///run/kubelet.sock"
    assert parse_args([], environ={"NODE_NAME": "n1"}).node_name == "n1"
    assert parse_args([], environ={"NODE_NAME": "n1",
                                   "PODRESOURCES_EXPORTER_NODE_NAME": "n2"}).node_name == "n2"
    assert parse_args(["--node-name", "n3"], environ={"NODE_NAME": "n1"}).node_name == "n3"


def test_defaults_match_the_documented_contract():
    args = parse_args([], environ={})
    assert args.socket == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert args.sysfs_root == "/sys"
    assert args.interval == 10.0 and args.allocatable_interval == 60.0
    assert args.max_refresh_rate == 1.0 and args.watch_path is None
    assert args.max_message_bytes == 16 * 1024 * 1024 and args.timeout == 10.0
    assert args.log_format == "text" and args.log_level == "info"
    assert not args.no_workload_metrics and not args.no_device_info


def test_simulator_rate_limit_defaults_to_the_kubelets():
    from exporter.simulator.node.faults import DEFAULT_BURST, DEFAULT_QPS
    from exporter.simulator.node.server import DEFAULT_REREGISTER_SECONDS

    args = parse_args(["simulate", "--socket", "/run/kubelet.sock"], environ={})
    # the kubelet's podresources token bucket: 100 calls per second, burst 10
    assert (args.qps, args.burst) == (100.0, 10) == (DEFAULT_QPS, DEFAULT_BURST)
    # device plugins re-register a few seconds after a kubelet restart (SPEC section 2)
    assert args.reregister_seconds == 3.0 == DEFAULT_REREGISTER_SECONDS


async def run(*argv: str, timeout: float = 30) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", *argv, cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(), err.decode()


async def test_snapshot_prints_a_per_numa_table():
    async with Node("dual-socket-gpu") as node:
        code, out, err = await run("snapshot", "--socket", f"unix://{node.socket}",
                                   "--sysfs-root", str(node.sysfs), "--node-name", "gpu-node-01")
    assert code == 0, err
    assert "Node gpu-node-01: kubelet podresources API v1" in out
    lines = out.splitlines()
    cpu_rows = [line.split() for line in lines if line.startswith(("0 ", "1 "))][:2]
    # the kubelet's placements (tests/integration/test_integration.py works them out)
    assert cpu_rows[0][:5] == ["0", "0-15,32-47", "30", "30", "100.0%"]
    assert cpu_rows[1][:5] == ["1", "16-31,48-63", "32", "28", "87.5%"]
    assert any(line.split()[:2] == ["1", "memory"] for line in lines)
    assert "hpc/mpi-rank-0/rank: needs 2 NUMA nodes" in out
    assert "Data issues: none" in out


async def test_snapshot_json_and_unreachable_kubelet():
    async with Node(small_profile(pods=[{"namespace": "ns", "name": "p", "containers": [
            {"name": "c", "cpus": 3}]}])) as node:
        code, out, _ = await run("snapshot", "--format", "json", "--socket", str(node.socket),
                                 "--sysfs-root", str(node.sysfs))
        assert code == 0
        document = json.loads(out)
        assert document["cpus_allocated"] == [{"numa_node": "0", "value": 3},
                                              {"numa_node": "1", "value": 0}]
        assert document["pods"][0]["containers"][0]["container"] == "c"
        assert len(document["pods"][0]["containers"][0]["cpus_by_numa_node"]) == 1
        assert document["kubelet"]["api_version"] == "v1"
        code, out, err = await run("snapshot", "--socket", str(node.dir / "absent.sock"),
                                   "--sysfs-root", str(node.sysfs))
    assert code == 1
    assert "cannot read the kubelet" in err and "UNAVAILABLE" in err
    # one line, and nothing about retrying or serving: a one-shot read has neither
    assert err.count("\n") == 1, err
    assert "retrying" not in err and "last good snapshot" not in err


async def test_simulate_serves_a_kubelet_until_sigterm():
    """The simulator alone, as benchmarks and dashboard work run it: the exporter's snapshot
    reads it, its control endpoint and state files are there, SIGTERM ends it cleanly."""
    workdir = short_tmpdir()
    control = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "simulate", "--profile", "small",
        "--socket", f"unix://{workdir}/kubelet.sock", "--sysfs-root", str(workdir / "sys"),
        "--control-address", f"127.0.0.1:{control}", "--state-dir", str(workdir / "state"),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with aiohttp.ClientSession() as session:
            deadline = time.monotonic() + 20
            while True:
                try:
                    async with session.get(f"http://127.0.0.1:{control}/state") as response:
                        state = await response.json()
                        break
                except aiohttp.ClientError:
                    assert time.monotonic() < deadline, "the simulator did not come up"
                    await asyncio.sleep(0.1)
        code, out, err = await run("snapshot", "--format", "json", "--socket",
                                   str(workdir / "kubelet.sock"), "--sysfs-root",
                                   str(workdir / "sys"))
        assert code == 0, err
        # small: CPUs 0-7, 0 reserved; inference-0 and packet-filter-0 hold 2 exclusive each
        assert json.loads(out)["cpus_allocated"] == [{"numa_node": "0", "value": 4}]
        assert state["socket"] == str(workdir / "kubelet.sock")
        assert (workdir / "state" / "cpu_manager_state").is_file()
    finally:
        elapsed = await terminate(proc)
        shutil.rmtree(workdir, ignore_errors=True)
    assert proc.returncode == 0, (await proc.stderr.read()).decode()
    assert elapsed < 5.0


async def test_serve_process_scrapes_and_stops_cleanly_on_sigterm():
    async with Node("dual-socket-gpu") as node:
        port = free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "exporter", "--socket", str(node.socket),
            "--sysfs-root", str(node.sysfs), "--listen-address", f"127.0.0.1:{port}",
            "--interval", "1", "--node-name", "gpu-node-01", "--log-format", "json", cwd=REPO,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            scrape = await _scrape_until_up(port)
            assert scrape.value("podresources_cpus_allocated", numa_node="0") == 30
        finally:
            elapsed = await terminate(proc)
        err = (await proc.stderr.read()).decode()
    assert proc.returncode == 0, err
    assert elapsed < 5.0
    records = [json.loads(line) for line in err.splitlines()]
    assert {"time", "level", "logger", "msg"} <= set(records[0])
    assert any("shutting down" in r["msg"] for r in records)


async def test_demo_serves_two_numa_nodes_of_metrics():
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "demo", "--listen-address", f"127.0.0.1:{port}",
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        # the first complete picture: up, with the allocatable view read (a loaded machine may
        # answer List before GetAllocatableResources)
        scrape = await scrape_port_until(
            port, lambda s: s.get("podresources_up") == 1.0
            and len(s.by("podresources_cpus_allocatable", "numa_node")) == 2,
            20.0, "the demo's two NUMA nodes")
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 10)
    assert proc.returncode == 0
    for name in ("podresources_cpus_allocated", "podresources_cpus_allocatable"):
        assert set(scrape.by(name, "numa_node")) == {"0", "1"}
    assert {k[1] for k in scrape.by("podresources_memory_allocated_bytes", "numa_node",
                                    "memory_type")} == {"memory", "hugepages-1Gi", "hugepages-2Mi"}
    assert scrape.series("podresources_devices_allocated", resource="nvidia.com/gpu")
    assert scrape.series("podresources_numa_utilization_ratio", numa_node="1")
    assert scrape.series("podresources_container_cpus")


async def _scrape_until_up(port: int, timeout: float = 20.0) -> Scrape:
    return await scrape_port_until(port, lambda s: s.get("podresources_up") == 1.0, timeout,
                                   "the exporter to come up")


async def test_demo_kubelet_can_be_misbehaved_from_outside():
    """An operator's tour: garbage, a restart and a drained quota; /metrics answers throughout."""
    import grpc.aio

    from exporter._proto.v1 import api_pb2 as v1, api_pb2_grpc as v1_grpc

    port, control = free_port(), free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "demo", "--listen-address", f"127.0.0.1:{port}",
        "--control-address", f"127.0.0.1:{control}", "--interval", "0.5", cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    statuses: list[int] = []
    try:
        await _scrape_until_up(port)
        async with aiohttp.ClientSession() as session:
            async def scrape() -> Scrape:
                async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                    statuses.append(response.status)
                    return Scrape(await response.text())

            async def until(predicate, what: str) -> Scrape:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    scrape_now = await scrape()
                    if predicate(scrape_now):
                        return scrape_now
                    await asyncio.sleep(0.2)
                raise AssertionError(f"timed out waiting for {what}")

            base = f"http://127.0.0.1:{control}"
            await session.post(f"{base}/faults", json={"garbage": "bytes"})
            await until(lambda s: s.get("podresources_data_issues_total",
                                        kind="invalid_reply") >= 1, "invalid_reply")
            await session.post(f"{base}/faults", json={"garbage": ""})
            await until(lambda s: s.get("podresources_up") == 1.0, "recovery from garbage")
            await session.post(f"{base}/restart", json={"downtime": 1.5})
            await until(lambda s: s.get("podresources_up") == 0.0, "the kubelet gone")
            recovered = await until(lambda s: s.get("podresources_up") == 1.0,
                                    "the kubelet back")
            async with session.get(f"{base}/state") as response:
                socket_path = (await response.json())["socket"]
        # a second client drains the kubelet's quota
        channel = grpc.aio.insecure_channel(f"unix://{socket_path}")
        stub = v1_grpc.PodResourcesListerStub(channel)
        rejected = 0
        for _ in range(300):
            try:
                await stub.List(v1.ListPodResourcesRequest())
            except grpc.aio.AioRpcError:
                rejected += 1
        await channel.close()
    finally:
        await terminate(proc)
    assert proc.returncode == 0
    assert set(statuses) == {200}
    assert rejected > 0
    assert recovered.value("podresources_cpus_allocated", numa_node="0") == 30


# ---- flags before the command, listen hosts, profiles, the snapshot's sysfs -----------------

@pytest.mark.parametrize("argv, command, attribute, value", [
    (["--socket", "/run/k.sock", "snapshot"], "snapshot", "socket", "/run/k.sock"),
    (["--listen-address", "127.0.0.1:0", "demo"], "demo", "listen_address", ("127.0.0.1", 0)),
    (["--format", "json", "snapshot"], "snapshot", "format", "json"),
    (["--format=json", "snapshot", "--socket", "/run/k.sock"], "snapshot", "format", "json"),
    (["--sock", "/run/k.sock", "snapshot"], "snapshot", "socket", "/run/k.sock"),
    (["--node-name", "snapshot", "demo"], "demo", "node_name", "snapshot"),
    (["--no-workload-metrics", "demo"], "demo", "no_workload_metrics", True),
    (["--log-level", "debug", "simulate", "--socket", "/run/k.sock"], "simulate", "log_level",
     "debug"),
    (["--socket", "/run/a.sock", "snapshot", "--socket", "/run/b.sock"], "snapshot", "socket",
     "/run/b.sock"),
])
def test_flags_before_the_command_apply_to_it(argv, command, attribute, value):
    args = parse_args(argv, environ={})
    assert args.command == command
    assert getattr(args, attribute) == value


def test_a_flag_the_command_does_not_take_is_refused_wherever_it_is(capsys):
    for argv in (["--interval", "5", "snapshot"], ["snapshot", "--interval", "5"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "unrecognized arguments: --interval 5" in err, err


def test_the_demo_listens_on_this_machine_only_unless_told_otherwise():
    from exporter.commands.demo import demo_url

    assert parse_args(["demo"], environ={}).listen_address == ("localhost", 10075)
    assert parse_args([], environ={}).listen_address == ("", 10075)  # the DaemonSet: every one
    assert parse_args(["demo", "--listen-address", ":8080"], environ={}).listen_address == \
        ("", 8080)
    assert demo_url("localhost", 1234) == "http://localhost:1234/metrics (this machine only)"
    assert demo_url("::1", 1234) == "http://[::1]:1234/metrics (this machine only)"
    assert demo_url("127.0.0.2", 1234) == "http://127.0.0.2:1234/metrics (this machine only)"
    assert demo_url("", 1234).endswith("(listening on every interface: other machines can "
                                       "reach it too)")
    assert demo_url("192.0.2.7", 1234) == "http://192.0.2.7:1234/metrics"


@pytest.mark.parametrize("host, reason", [
    ("no-such-host.invalid", "--listen-address: cannot resolve 'no-such-host.invalid': "),
    ("192.0.2.1", "--listen-address: 192.0.2.1 is not an address of this machine"),
])
def test_a_listen_host_that_is_not_here_exits_2_with_one_line(host, reason, capsys, tmp_path):
    from exporter.simulator import load_profile, write_sysfs

    sysfs = write_sysfs(load_profile("small"), tmp_path / "sys")
    assert main(["--listen-address", f"{host}:0", "--sysfs-root", str(sysfs),
                 "--socket", str(tmp_path / "kubelet.sock")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"podresources-exporter: error: {reason}")


def test_a_bundled_profile_name_wins_over_a_file_of_that_name(tmp_path, monkeypatch, capsys):
    from exporter.commands.demo import load_profile
    from exporter.commands.serve import UsageError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "large").write_text("not a profile")
    assert len(load_profile("large").numa_nodes) == 8  # the bundled large profile
    with pytest.raises(UsageError, match=r"--profile: profile \./large is not valid JSON"):
        load_profile("./large")
    (tmp_path / "mine.json").write_text("[]")
    with pytest.raises(UsageError, match=r"profile mine\.json is not a JSON object"):
        load_profile("mine.json")
    with pytest.raises(UsageError, match=r"a file needs a path with a slash or a \.json name"):
        load_profile("mine")
    assert main(["demo", "--profile", "./large"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


async def test_flags_before_snapshot_reach_the_kubelet_they_name():
    async with Node("dual-socket-gpu") as node:
        code, out, err = await run("--socket", str(node.socket), "--sysfs-root", str(node.sysfs),
                                   "--format", "json", "snapshot")
    assert code == 0, err
    assert json.loads(out)["cpus_allocated"] == [{"numa_node": "0", "value": 30},
                                                {"numa_node": "1", "value": 28}]


async def test_snapshot_refuses_a_sysfs_of_another_machine_unless_it_was_chosen(tmp_path,
                                                                                capsys):
    """A simulated kubelet's socket read with this machine's /sys would mix two machines."""
    from exporter.commands.serve import UsageError
    from exporter.commands.snapshot import snapshot
    from exporter.simulator import load_profile, write_sysfs

    small = write_sysfs(load_profile("small"), tmp_path / "sys")  # 1 NUMA node, CPUs 0-7
    async with Node("dual-socket-gpu") as node:  # 2 NUMA nodes, CPUs 0-63
        settings = node.settings(sysfs_root=str(small))
        with pytest.raises(UsageError) as refused:
            await snapshot(settings, "table", "info", sysfs_given=False)
        assert str(refused.value).startswith(
            f"--sysfs-root: the kubelet at unix://{node.socket} reports CPUs 8-31,33-63 "
            f"and NUMA node 1 that {small} does not have, so the two are not the same machine")
        assert capsys.readouterr().out == ""
        # chosen on purpose: the report, with a warning saying what is off
        assert await snapshot(settings, "table", "info", sysfs_given=True) == 0
        captured = capsys.readouterr()
        assert "reports CPUs 8-31,33-63 and NUMA node 1 that" in captured.err
        assert "Data issues: " in captured.out and "unknown_cpu" in captured.out
        # the matching sysfs: no complaint
        assert await snapshot(node.settings(), "table", "info", sysfs_given=False) == 0
        assert capsys.readouterr().err == ""


async def test_the_demo_says_where_it_listens_and_prints_a_working_snapshot_command():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "demo", "--listen-address", "localhost:0",
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        while not any("snapshot --socket" in line for line in lines):
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, lines
            lines.append(line)
        command = next(line for line in lines if "snapshot --socket" in line)
        assert any("-> http://localhost:" in line and line.rstrip().endswith(
            "/metrics (this machine only)") for line in lines), lines
        numa = next(line for line in lines if "NUMA map in a browser: " in line)
        assert re.fullmatch(r"http://localhost:\d+/numa", numa.split("browser: ")[1].strip())
        argv = command.split("read it once with: podresources-exporter ", 1)[1].split()
        code, out, err = await run(*argv)
    finally:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 10)
    assert code == 0, err
    assert err == ""
    cpu_rows = [line.split()[:3] for line in out.splitlines() if line.startswith(("0 ", "1 "))]
    assert cpu_rows[:2] == [["0", "0-15,32-47", "30"], ["1", "16-31,48-63", "32"]]  # its sysfs


def test_what_a_foreign_kubelet_names_is_said_in_a_short_line():
    from exporter.commands.snapshot import _foreign_kubelet
    from exporter.model import (
        ContainerAssignment,
        DeviceEntry,
        KubeletSnapshot,
        NumaNode,
        PodAssignment,
        Topology,
    )

    topology = Topology.from_nodes([NumaNode(0, frozenset(range(4)))])
    hostile = KubeletSnapshot((PodAssignment("ns", "p", (ContainerAssignment(
        "c", cpu_ids=tuple(range(10, 5000, 2)),
        devices=(DeviceEntry("r/x", ("d",), tuple(range(20000))),)),)),), None)
    assert _foreign_kubelet(hostile, topology) == (
        "CPUs 10,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,44,46,48,... (2495 in all) "
        "and NUMA nodes 1, 2, 3, 4, 5, 6, 7, 8 and 19991 more")
    mine = KubeletSnapshot((PodAssignment("ns", "p", (ContainerAssignment(
        "c", cpu_ids=(1, 2), devices=(DeviceEntry("r/x", ("d",), (0, -1)),)),)),), None)
    assert _foreign_kubelet(mine, topology) == ""  # a negative id is a data issue, not a machine
