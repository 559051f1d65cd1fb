"""Open a page in headless Chromium and report what a person (and its console) would see.

Speaks the DevTools protocol over a websocket (aiohttp): starts
``chromium --headless --remote-debugging-port=0``, opens the page in a new
target, collects console errors, uncaught exceptions and failed loads, waits
for the load event, then evaluates expressions in the page.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

__all__ = ["PageReport", "chromium", "open_page"]


def chromium() -> str:
    """The Chromium binary; skips the test when there is none (fails when it is required)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CALLRT_REQUIRE_BROWSER") == "1":
        pytest.fail("chromium is not installed but CALLRT_REQUIRE_BROWSER=1")
    pytest.skip("chromium is not installed (apt-get install chromium)")


@dataclass
class PageReport:
    """What loading the page produced."""

    errors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)


async def open_page(url: str, expressions: dict[str, str], *, limit: float = 60) -> PageReport:
    """Load ``url``; return console errors and the value of each JS expression."""
    profile = tempfile.mkdtemp(prefix="callrt-chromium-")
    proc = subprocess.Popen(  # noqa: ASYNC220 (a browser for the whole test, not awaited)
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        return await asyncio.wait_for(_drive(proc, url, expressions), limit)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)


async def _browser_ws(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, proc.stderr.readline)
        if not line:
            raise RuntimeError("chromium exited before its DevTools endpoint was up")
        found = re.search(r"DevTools listening on (ws://\S+)", line)
        if found:
            return found.group(1)


async def _drive(proc: subprocess.Popen[str], url: str, expressions: dict[str, str]) -> PageReport:
    report = PageReport()
    ids = itertools.count(1)
    pending: dict[int, asyncio.Future[Any]] = {}
    loaded = asyncio.Event()
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(await _browser_ws(proc), max_msg_size=0) as ws,
    ):
        session: str | None = None

        async def call(method: str, params: dict[str, Any] | None = None) -> Any:
            n = next(ids)
            message: dict[str, Any] = {"id": n, "method": method, "params": params or {}}
            if session is not None:
                message["sessionId"] = session
            pending[n] = asyncio.get_running_loop().create_future()
            await ws.send_str(json.dumps(message))
            return await pending[n]

        async def receive() -> None:
            async for msg in ws:
                data = json.loads(msg.data)
                if "id" in data and data["id"] in pending:
                    fut = pending.pop(data["id"])
                    if "error" in data:
                        fut.set_exception(RuntimeError(str(data["error"])))
                    else:
                        fut.set_result(data.get("result"))
                    continue
                method, params = data.get("method"), data.get("params", {})
                if method == "Runtime.exceptionThrown":
                    report.errors.append(json.dumps(params["exceptionDetails"])[:500])
                elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                    "error",
                    "assert",
                ):
                    report.errors.append(f"console.{params['type']}: {params.get('args')}"[:500])
                elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                    report.errors.append(f"log: {params['entry'].get('text')}"[:500])
                elif method == "Page.loadEventFired":
                    loaded.set()

        reader = asyncio.create_task(receive())
        try:
            target = await call("Target.createTarget", {"url": "about:blank"})
            attached = await call(
                "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
            )
            session = attached["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                await call(f"{domain}.enable")
            await call("Page.navigate", {"url": url})
            await loaded.wait()
            for name, expression in expressions.items():
                result = await call(
                    "Runtime.evaluate",
                    {"expression": expression, "returnByValue": True, "awaitPromise": True},
                )
                report.values[name] = result["result"].get("value")
            # a moment for late console errors (scripts run at load)
            await asyncio.sleep(0.3)
        finally:
            reader.cancel()
    return report


def file_url(path: Path) -> str:
    return path.resolve().as_uri()
