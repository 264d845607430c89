"""A tiny headless-Chromium driver over the Chrome DevTools protocol (on a pipe, standard library only),
for testing the leaderboard site: open a page, evaluate JavaScript, click, see dialogs, take screenshots.
`find_chromium()` returns the executable or None (tests skip then). Command line:
``python -m polar_bench.leaderboard.browser screenshot PAGE OUT.png``. See docs/leaderboard.md.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["Chromium", "BrowserError", "find_chromium", "CHROMIUM_FLAGS"]

# Flags for a quiet, offline, root-safe headless browser (the sandbox needs user namespaces, which
# containers and root often lack).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
                  "--remote-debugging-pipe"]
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserError(RuntimeError):
    """The browser could not be started, died, or answered a command with an error."""


def find_chromium() -> str | None:
    """The Chromium executable: $POLAR_BENCH_CHROMIUM, else the first of chromium, chromium-browser,
    google-chrome on PATH; None when there is none."""
    env = os.environ.get("POLAR_BENCH_CHROMIUM")
    if env:
        return env if Path(env).is_file() else shutil.which(env)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _high_fd(fd: int) -> int:
    """A duplicate of ``fd`` numbered 10 or above (so that dup2 onto 3 and 4 cannot clobber it)."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class Chromium:
    """A headless Chromium with one page, driven over the DevTools pipe. A context manager."""

    def __init__(self, executable: str | None = None, width: int = 1280, height: int = 900,
                 timeout: float = 30.0):
        found = executable or find_chromium()
        if not found:
            raise BrowserError("no Chromium found: install it (Debian: apt-get install -y chromium) "
                               "or set POLAR_BENCH_CHROMIUM to its path")
        self.executable: str = found
        self.width, self.height, self.timeout = width, height, timeout
        self.proc: subprocess.Popen | None = None
        self.profile: tempfile.TemporaryDirectory | None = None
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict] = []
        self.dialogs: list[dict] = []  # every JavaScript dialog (alert, confirm, prompt) the page opened
        self.console_errors: list[str] = []
        self.session: str | None = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def __enter__(self) -> Chromium:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="polar_bench_chromium_")
        cmd_r, cmd_w = (_high_fd(fd) for fd in os.pipe())    # we write commands, Chromium reads fd 3
        resp_r, resp_w = (_high_fd(fd) for fd in os.pipe())  # Chromium writes fd 4, we read

        def child_fds() -> None:
            os.dup2(cmd_r, 3)
            os.dup2(resp_w, 4)

        args = [self.executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile.name}",
                f"--window-size={self.width},{self.height}", "about:blank"]
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, pass_fds=(3, 4), preexec_fn=child_fds)
        except OSError as exc:
            raise BrowserError(f"cannot start {self.executable}: {exc}") from None
        finally:
            os.close(cmd_r)
            os.close(resp_w)
        self._out, self._in = cmd_w, resp_r
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                          "deviceScaleFactor": 1, "mobile": False})

    def close(self) -> None:
        if self.proc is not None:
            try:
                if self.proc.poll() is None:
                    self._write({"id": self._new_id(), "method": "Browser.close"})
                    self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
            for fd in (self._out, self._in):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.proc = None
        if self.profile is not None:
            self.profile.cleanup()
            self.profile = None

    # -- protocol -----------------------------------------------------------------------------------
    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _write(self, message: dict) -> None:
        data = json.dumps(message).encode() + b"\0"
        while data:
            n = os.write(self._out, data)
            data = data[n:]

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"Chromium did not answer within {self.timeout:g} s")
            ready, _, _ = select.select([self._in], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium exited (code {self.proc.poll() if self.proc else None})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message = json.loads(raw)
        if message.get("method") == "Page.javascriptDialogOpening":
            self.dialogs.append(message["params"])
            # answer it, or the page stays blocked
            self._write({"id": self._new_id(), "method": "Page.handleJavaScriptDialog",
                         "params": {"accept": True}, "sessionId": message.get("sessionId")})
        elif message.get("method") == "Runtime.exceptionThrown":
            details = message["params"].get("exceptionDetails", {})
            self.console_errors.append(str(details.get("exception", {}).get("description")
                                           or details.get("text")))
        return message

    def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        mid = self._new_id()
        message: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        self._write(message)
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == mid:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, ev in enumerate(self._events):
                if ev["method"] == method:
                    return self._events.pop(i)
            ev = self._read(deadline)
            if "method" in ev:
                self._events.append(ev)

    # -- page ---------------------------------------------------------------------------------------
    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self._events = [e for e in self._events if e["method"] != "Page.loadEventFired"]
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serializable values only)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} raised: "
                               f"{result['exceptionDetails'].get('exception', {}).get('description')}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the centre of the first element matching
        ``selector``, scrolled into view first."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            f" e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect();"
            f" return [r.left + r.width / 2, r.top + r.height / 2]; }})()")
        if box is None:
            raise BrowserError(f"no element matches {selector!r}")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            params = {"type": kind, "x": x, "y": y}
            if kind != "mouseMoved":
                params.update(button="left", clickCount=1)
            self.send("Input.dispatchMouseEvent", params)

    def screenshot(self, path: str | os.PathLike, full_page: bool = False) -> Path:
        """Write a PNG of the viewport (or of the whole page)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        out = Path(path)
        out.write_bytes(base64.b64decode(data))
        return out


def _main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m polar_bench.leaderboard.browser")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("screenshot", help="a PNG of a page (a file path or a URL)")
    p.add_argument("page")
    p.add_argument("out")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=720)
    args = parser.parse_args(argv)
    url = args.page if "://" in args.page else Path(args.page).resolve().as_uri()
    with Chromium(width=args.width, height=args.height) as browser:
        browser.open(url)
        browser.screenshot(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
