"""The node map page in a real browser: how long chromium takes to show ``/numa``, per profile,
and the screenshot of the demo node in the README and docs.

    python -m benchmarks.numa_page                    # small, dual-socket-gpu, large, gb200-tray
    python -m benchmarks.numa_page --profiles large --loads 10
    python -m benchmarks.numa_page --screenshot docs/numa-map.png   # the demo node's map

For each profile: a simulator and an exporter process; the page's size and the time the
exporter takes to answer its first request (it builds the page then) and a repeated one (the
page of that refresh, kept); then, in Debian's headless chromium (``tests/tools/chromium.sh``,
driven by ``tests/support/chromium.py``), per load: the fetch, the load event, and
"rendered" (two animation frames after the load event: layout and paint done), all from the
start of the navigation, as medians. Numbers are printed (and written as JSON with
``--json``), never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from tests.support.chromium import Browser

from .harness import REPO, Simulator, free_port, start_exporter, stop, wait_up

PROFILES = ("small", "dual-socket-gpu", "large", "gb200-tray")
TIMINGS = """(async () => {
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const nav = performance.getEntriesByType('navigation')[0];
  return {fetch: nav.responseEnd, load: nav.loadEventEnd, rendered: performance.now(),
          cells: document.querySelectorAll('[data-cpu]').length,
          chips: document.querySelectorAll('[data-device]').length};
})()"""


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        sys.exit("chromium not found: bash tests/tools/chromium.sh installs Debian's")
    return found


async def timed_get(session: aiohttp.ClientSession, url: str) -> tuple[float, int]:
    started = time.perf_counter()
    async with session.get(url) as response:
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}")
    return time.perf_counter() - started, len(body)


async def measure(profile: str, loads: int, browser: Browser) -> dict[str, object]:
    sim = Simulator(profile)
    proc, port = start_exporter(sim)
    try:
        async with aiohttp.ClientSession() as session:
            await wait_up(session, port)
            url = f"http://127.0.0.1:{port}/numa"
            first, size = await timed_get(session, url)
            again, _ = await timed_get(session, url)
        page = await browser.page()
        runs = []
        for _ in range(loads):
            await page.goto(url)
            runs.append(await page.evaluate(TIMINGS))
        errors = page.errors()
    finally:
        stop(proc)
        sim.stop()
    return {"profile": profile, "bytes": size, "first_answer_ms": first * 1000,
            "kept_answer_ms": again * 1000, "cells": runs[-1]["cells"],
            "chips": runs[-1]["chips"], "console_errors": len(errors),
            **{f"{key}_ms": statistics.median(run[key] for run in runs)
               for key in ("fetch", "load", "rendered")}}


async def screenshot(path: Path, browser: Browser) -> None:
    """The demo node (its simulator, Kubernetes API and shapes) as the README shows it."""
    port = free_port()
    demo = subprocess.Popen([sys.executable, "-m", "exporter", "demo", "--listen-address",
                             f"127.0.0.1:{port}", "--log-level", "warning"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as session:
            samples = await wait_up(session, port)
            deadline = time.monotonic() + 60
            # the first complete picture: DRA devices placed by their ResourceSlices, shapes
            while not any(key[0] == "podresources_dra_devices_allocatable" for key in samples) \
                    or not any(key[0] == "podresources_shape_admitted" for key in samples):
                if time.monotonic() > deadline:
                    raise RuntimeError("the demo did not show its whole picture")
                await asyncio.sleep(0.5)
                samples = await wait_up(session, port)
        page = await browser.page()
        await page.goto(f"http://127.0.0.1:{port}/numa")
        width = await page.evaluate("document.querySelector('svg.nodemap').width.baseVal.value")
        await page.screenshot(path, int(width))
        if page.errors():
            raise RuntimeError(f"console errors: {page.errors()}")
    finally:
        stop(demo)
    print(f"wrote {path} ({path.stat().st_size} bytes, {int(width)} px wide)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--loads", type=int, default=5, help="page loads per profile")
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument("--screenshot", type=Path, help="only take the demo node's screenshot")
    args = parser.parse_args()
    async with Browser(chromium()) as browser:
        if args.screenshot:
            await screenshot(args.screenshot, browser)
            return
        results = [await measure(profile, args.loads, browser)
                   for profile in args.profiles.split(",")]
    columns = ("profile", "cells", "chips", "bytes", "first_answer_ms", "kept_answer_ms",
               "fetch_ms", "load_ms", "rendered_ms", "console_errors")
    print("  ".join(f"{c:>15}" for c in columns))
    for result in results:
        print("  ".join(f"{result[c]:>15.1f}" if isinstance(result[c], float)
                        else f"{result[c]!s:>15}" for c in columns))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
