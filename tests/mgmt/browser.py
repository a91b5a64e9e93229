"""Headless Chromium driven over the DevTools protocol (CDP), for the web UI's tests.

Debian's `chromium` package; started with a fresh profile, no network services, on a free
debugging port that it writes to <profile>/DevToolsActivePort. The CDP client is aiohttp's
websocket client (aiohttp is installed anyway). Stopped by its PID.
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from tests.waiting import async_until, until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
start_timeout_s = 30.0


class Browser:
    def __init__(self) -> None:
        assert CHROMIUM is not None
        self.profile = Path(tempfile.mkdtemp(prefix="warren-chromium-"))
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-port=0",
             "--remote-debugging-address=127.0.0.1", f"--user-data-dir={self.profile}", "--window-size=1280,900",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        started = until(lambda: self.proc.poll() is not None or (port_file.exists() and port_file.read_text().strip()),
                        "chromium's DevTools port", start_timeout_s, raises=False)
        if not started or self.proc.poll() is not None:
            self.close()
            raise RuntimeError("chromium did not start")
        self.port = int(port_file.read_text().split()[0])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def page(self) -> Page:
        session = aiohttp.ClientSession()
        async with session.get(f"http://127.0.0.1:{self.port}/json/list") as resp:
            targets = await resp.json(content_type=None)
        url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        return Page(session, await session.ws_connect(url, max_msg_size=64 * 1024 * 1024))


class Page:
    def __init__(self, session: aiohttp.ClientSession, ws: Any) -> None:
        self.session, self.ws, self._id = session, ws, 0

    async def call(self, method: str, **params: Any) -> dict:
        self._id += 1
        await self.ws.send_str(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads((await self.ws.receive()).data)
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def until(self, expression: str, what: str, timeout_s: float = 30.0) -> Any:
        """The first truthy value of `expression` in the page (tests/waiting.py's async_until)."""
        return await async_until(lambda: self.evaluate(expression), what, timeout_s, every_s=0.1)

    async def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode((await self.call("Page.captureScreenshot", format="png"))["data"])
        path.write_bytes(data)
        return data

    async def close(self) -> None:
        await self.ws.close()
        await self.session.close()
