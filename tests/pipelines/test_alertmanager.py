"""headroom's alerts through a real Prometheus Alertmanager on a loopback port: delivered,
read back from its API, and none lost or doubled across an Alertmanager restart."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from anomaly.alert import Alert
from pipelines.detect import alerts as al

# .ci/run installs Debian's prometheus-alertmanager; elsewhere the test needs it on PATH
BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
pytestmark = pytest.mark.skipif(BINARY is None, reason="no alertmanager binary (apt install prometheus-alertmanager)")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Alertmanager:
    """One Alertmanager process: a null receiver, no clustering, its data in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, _port()
        self.url = f"http://127.0.0.1:{self.port}"
        (folder / "am.yml").write_text("route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [BINARY, f"--config.file={self.folder / 'am.yml'}", f"--storage.path={self.folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
            stdout=subprocess.DEVNULL, stderr=(self.folder / "am.log").open("ab"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"alertmanager did not start: {(self.folder / 'am.log').read_text()[-500:]}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def alerts(self) -> list[dict]:
        with urllib.request.urlopen(self.url + "/api/v2/alerts", timeout=5) as r:
            return json.loads(r.read())


def _alerts(now: datetime, tag: str) -> list[Alert]:
    start, end = pd.Timestamp(now), pd.Timestamp(now) + pd.Timedelta(hours=6)
    return [
        Alert(kind="hardware_fault", entity=f"node-{tag}-gpu0", window_start=start, window_end=end,
              severity="critical", probability=0.9, summary="may fail", runbook="drain it"),
        Alert(kind="burst", entity=f"dc1/{tag}/gpu", window_start=start, window_end=end, severity="warning",
              summary="demand burst"),
        Alert(kind="price_spike", entity=f"aws/us-east-1a/p4d.24xlarge-{tag}/Linux", window_start=start,
              window_end=end, severity="info", probability=0.6, summary="spike ahead"),
    ]


def test_alerts_reach_a_real_alertmanager_and_survive_its_restart(con, tmp_path: Path) -> None:
    am = Alertmanager(tmp_path)
    sink = al.AlertmanagerSink(am.url, retries=0)
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    am.start()
    try:
        first = _alerts(now, "a")
        for kind in ("hardware_fault", "burst", "price_spike"):
            al.sync_alerts(con, kind, [a for a in first if a.kind == kind], now, [sink.name])
        assert al.deliver_pending(con, [sink], now) == {"alertmanager": 3}
        got = am.alerts()
        assert sorted(a["labels"]["entity"] for a in got) == sorted(a.entity for a in first)
        assert {a["labels"]["severity"] for a in got} == {"critical", "warning", "info"}
        assert all(a["status"]["state"] == "active" for a in got)

        am.stop()  # down: the next run's alerts cannot go out, and stay pending
        later = now + timedelta(minutes=15)
        both = first + _alerts(later, "b")
        for kind in ("hardware_fault", "burst", "price_spike"):
            al.sync_alerts(con, kind, [a for a in both if a.kind == kind], later, [sink.name])
        assert al.deliver_pending(con, [sink], later) == {"alertmanager": 0}

        am.start()  # back, empty (Alertmanager keeps alerts in memory): the next run delivers the three
        # that waited and re-posts the firing ones it had delivered before (re-posts are not counted)
        again = later + timedelta(minutes=15)
        for kind in ("hardware_fault", "burst", "price_spike"):
            al.sync_alerts(con, kind, [a for a in both if a.kind == kind], again, [sink.name])
        assert al.deliver_pending(con, [sink], again) == {"alertmanager": 3}
        got = am.alerts()
        entities = [a["labels"]["entity"] for a in got]
        assert sorted(entities) == sorted(a.entity for a in both)  # none lost, none twice
        assert len({a["fingerprint"] for a in got}) == 6
    finally:
        am.stop()


def test_a_replayed_alert_is_active_in_alertmanager_until_resolved(con, tmp_path: Path) -> None:
    """``detect --as-of`` on 2013's data fires on the data's clock; Alertmanager, on its own,
    shows the alert active (not ended on arrival) until the replay resolves it."""
    am = Alertmanager(tmp_path)
    sink = al.AlertmanagerSink(am.url, retries=0)
    then = datetime(2013, 7, 10, 12, 0)
    am.start()
    try:
        fault = [a for a in _alerts(then, "old") if a.kind == "hardware_fault"]
        al.sync_alerts(con, "hardware_fault", fault, then, [sink.name])
        assert al.deliver_pending(con, [sink], then) == {"alertmanager": 1}
        got = am.alerts()
        assert [a["labels"]["entity"] for a in got] == ["node-old-gpu0"]
        assert got[0]["status"]["state"] == "active" and got[0]["startsAt"].startswith("2013-07-10T12:00")
        later = then + timedelta(minutes=15)
        al.sync_alerts(con, "hardware_fault", [], later, [sink.name])
        assert al.deliver_pending(con, [sink], later) == {"alertmanager": 1}
        assert am.alerts() == []  # resolved at the data's time: no longer active
    finally:
        am.stop()
