"""The HTML report in a real headless Chromium, driven over the DevTools protocol: it renders
(a screenshot that is not blank), logs no console error, asks the network for nothing, and
reads on a 400-pixel screen (no page wider than the screen; wide tables scroll in a box)."""
from __future__ import annotations

import base64
import io
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

# .ci/run installs Debian's chromium; elsewhere the test needs it on PATH
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium (apt install chromium)")
LOCAL = ("file:", "data:", "about:", "blob:")  # what a self-contained page may load


class Page:
    """One Chromium page over the DevTools protocol: commands, and the events seen so far."""

    def __init__(self, profile: Path) -> None:
        from websockets.sync.client import connect

        self.proc = subprocess.Popen(
            [BROWSER, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
            target = next(t for t in json.loads(r.read()) if t["type"] == "page")
        self.ws = connect(target["webSocketDebuggerUrl"], max_size=None)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def call(self, method: str, **params: object) -> dict:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, event: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            self.events.append(json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.1))))

    def value(self, expression: str) -> object:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"]["value"]

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(str(p.get("args")))
        elif m == "Runtime.exceptionThrown":
            out.append(str(p.get("exceptionDetails")))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(str(p["entry"]))
    return out


def _not_blank(png: bytes) -> None:
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("L")
    lo, hi = image.getextrema()
    assert hi - lo > 100, "the screenshot is blank"
    dark = sum(image.histogram()[:128]) / (image.width * image.height)
    assert dark > 0.005, f"almost nothing drawn ({dark:.2%} dark pixels)"


@pytest.mark.slow
def test_the_report_renders_in_chromium_alone_and_on_a_phone(prefect_harness, db_path: Path, tmp_path: Path) -> None:
    from pipelines.flows.report import report_flow
    from pipelines.store import warehouse
    from tests.pipelines.test_report import _load_results, _load_utilization

    with warehouse.open_warehouse(db_path) as con:
        _load_utilization(con)
        _load_results(con)
    out = report_flow(db_path=str(db_path), out_dir=str(tmp_path / "out"))
    url = Path(out["html"]).resolve().as_uri()
    page = Page(tmp_path / "profile")
    try:
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            page.call(method)
        for width, mobile in ((1280, False), (400, True)):
            page.events.clear()
            page.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1,
                      mobile=mobile)
            page.call("Page.navigate", url=url)
            page.wait_for("Page.loadEventFired")
            assert page.value("document.querySelectorAll('h2').length") >= 5
            assert page.value("document.images.length") >= 1
            assert page.value("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
            shot = page.call("Page.captureScreenshot", format="png")
            png = base64.b64decode(shot["data"])
            (tmp_path / f"report-{width}.png").write_bytes(png)
            _not_blank(png)
            assert _errors(page.events) == [], f"console errors at {width}px"
            remote = [e["params"]["request"]["url"] for e in page.events if e.get("method") ==
                      "Network.requestWillBeSent" and not e["params"]["request"]["url"].startswith(LOCAL)]
            assert remote == [], f"the report asked the network for {remote[:3]}"
            # the page is no wider than the screen: a wide table scrolls inside its own box
            assert page.value("document.documentElement.scrollWidth") <= width
            assert page.value("[...document.querySelectorAll('table')].every(t => t.parentElement.className "
                              "=== 'wide')")
    finally:
        page.close()
