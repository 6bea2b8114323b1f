"""Helpers of the alert tests: a real local HTTP receiver that records what it is sent."""
from __future__ import annotations

import json
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd

from anomaly.alert import Alert

T0 = datetime(2026, 1, 10, 12, 0)
T1 = datetime(2026, 1, 10, 12, 15)
T2 = datetime(2026, 1, 10, 12, 30)


def before_t0() -> pd.Timestamp:
    """A wall clock behind the runs: Alertmanager's endsAt then follows the runs' own clock."""
    return pd.Timestamp("2026-01-01", tz="UTC")


class Recorder:
    """A tiny HTTP endpoint: records JSON bodies; fails the first ``fail`` requests with 503, or
    ``status`` with a web server's HTML error page that echoes the path asked for (``echo``)."""

    def __init__(self, fail: int = 0, status: int = 503, echo: bool = False) -> None:
        self.fail = fail
        self.bodies: list[tuple[str, object]] = []
        self.requests = 0
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.requests += 1
                if recorder.fail > 0:
                    recorder.fail -= 1
                    self.send_response(status)
                    page = (f"<!DOCTYPE HTML>\n<html><head>\n<title>{status}</title>\n</head><body>\n<p>The "
                            f"requested URL {self.path} was not found on this server.</p>\n</body></html>\n")
                    self.send_header("Content-Length", str(len(page) if echo else 0))
                    self.end_headers()
                    if echo:
                        self.wfile.write(page.encode())
                    return
                recorder.bodies.append((self.path, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def fault(entity: str = "n1-gpu0", p: float = 0.9) -> Alert:
    return Alert(kind="hardware_fault", entity=entity, window_start=pd.Timestamp("2026-01-10"),
                 window_end=pd.Timestamp("2026-01-11"), severity="critical", probability=p,
                 summary=f"{entity} may fail", runbook="drain it", labels=(("node", "n1"),))


def fault_at(severity: str, p: float) -> Alert:
    return Alert(kind="hardware_fault", entity="g1", window_start=pd.Timestamp("2026-01-10"),
                 window_end=pd.Timestamp("2026-01-11"), severity=severity, probability=p)
