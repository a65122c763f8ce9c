"""A real browser for the tests: Debian's headless Chromium, driven over its DevTools protocol
(a WebSocket, with Debian's python3-websocket), so a test reads the page as rendered (its DOM
after the page's scripts ran), clicks, and takes screenshots. Nothing is downloaded: the browser
is /usr/bin/chromium (scripts/install_deps.sh installs it).

One Browser serves several pages (tabs); each test opens its own. Waits poll the page with
generous deadlines, never fixed sleeps: the machines are small and often loaded."""

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import websocket

from harness import EVENT_DEADLINE

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# What makes Chromium run here: no sandbox (root), no GPU, and none of the background
# connections a closed network refuses (updates, sync, field trials).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio",
         "--remote-debugging-port=0", "--window-size=1280,1600"]


class Browser:
    """One Chromium process with a fresh profile in `directory`; close() ends it and its
    children (its own process group)."""

    def __init__(self, directory):
        self.directory = Path(directory)
        profile = self.directory / "profile"
        profile.mkdir(parents=True)
        self.log = open(self.directory / "chromium.log", "wb")
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                                      "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        # Chromium writes the port it picked, and its endpoint's path, into the profile.
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + EVENT_DEADLINE
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError("chromium did not start:\n" + self.output())
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        self.socket = websocket.create_connection(f"ws://127.0.0.1:{port}{path}",
                                                  timeout=EVENT_DEADLINE, suppress_origin=True)
        self._ids = itertools.count(1)
        self.events = []  # (session, method, params) of events read while waiting for answers

    def output(self):
        self.log.flush()
        return (self.directory / "chromium.log").read_text(errors="replace")[-4000:]

    def call(self, method, session=None, **params):
        """Sends one DevTools command (to a page when `session` is given); its result."""
        message = {"id": next(self._ids), "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            answer = json.loads(self.socket.recv())
            if answer.get("id") == message["id"]:
                if "error" in answer:
                    raise AssertionError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            if "method" in answer:
                self.events.append((answer.get("sessionId"), answer["method"],
                                    answer.get("params", {})))

    def new_page(self):
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        return Page(self, target, session)

    def close(self):
        if getattr(self, "socket", None) is not None:
            try:
                self.call("Browser.close")
            except Exception:  # noqa: BLE001 (it is going anyway)
                pass
            self.socket.close()
            self.socket = None
        if self.proc.poll() is None:
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        # Whatever is left of its renderers: the group we started it in, by its id.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        self.log.close()


class Page:
    """One tab: navigate, evaluate JavaScript in it, wait for what it shows, screenshot."""

    def __init__(self, browser, target, session):
        self.browser, self.target, self.session = browser, target, session
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method, **params):
        return self.browser.call(method, session=self.session, **params)

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def goto(self, url):
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'",
                      f"{url} to load")

    def wait_for(self, expression, what, timeout=EVENT_DEADLINE):
        """Evaluates `expression` until it is truthy (an element found counts as true); its
        value. The failure shows the page's text."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(f"(v => v instanceof Node ? true : v)({expression})")
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the page shows:\n"
                                     + (self.evaluate("document.body.innerText") or "")[:6000])
            time.sleep(0.2)

    def text(self, selector):
        """The rendered text of the first element `selector` matches ('' if none)."""
        return self.evaluate(f"(document.querySelector({json.dumps(selector)}) || "
                             "{innerText: ''}).innerText")

    def count(self, selector):
        return self.evaluate(f"document.querySelectorAll({json.dumps(selector)}).length")

    def visible(self, selector):
        """Whether the element is rendered (not display:none, itself or above)."""
        return self.evaluate(f"(e => !!e && e.getClientRects().length > 0)"
                             f"(document.querySelector({json.dumps(selector)}))")

    def click(self, selector):
        assert self.visible(selector), f"{selector} is not visible to click"
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")

    def errors(self):
        """Exceptions the page's scripts threw, and what they logged as errors."""
        found = []
        for session, method, params in self.browser.events:
            if session != self.session:
                continue
            if method == "Runtime.exceptionThrown":
                found.append(params["exceptionDetails"].get("text", "")
                             + " " + json.dumps(params["exceptionDetails"].get("exception", {})))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                found.append(" ".join(str(a.get("value", a.get("description", "")))
                                      for a in params.get("args", [])))
        return found

    def screenshot(self, path):
        """A PNG of the whole page (as tall as its content) at `path`."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.call("Emulation.setDeviceMetricsOverride", width=1280, height=min(height, 4000),
                  deviceScaleFactor=1, mobile=False)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))
        self.call("Emulation.clearDeviceMetricsOverride")
        return path

    def close(self):
        self.browser.call("Target.closeTarget", targetId=self.target)
