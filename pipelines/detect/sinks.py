"""Where alerts go: a JSONL file, a generic JSON webhook and Prometheus Alertmanager's
``POST /api/v2/alerts``, built from the settings (:func:`sinks_from_settings`). A sink
only sends; what was sent, and what waits, is :mod:`pipelines.detect.alerts`' bookkeeping.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, urlsplit

import httpx
import pandas as pd

from pipelines.runtime.outputs import OutputError, check_writable
from pipelines.runtime.text import printable


class Sink(Protocol):
    """Somewhere alerts go. ``send`` raises on any failure; the batch then stays pending.
    A sink with ``resends_firing = True`` also gets the still-firing alerts it was already
    sent, on every run (Alertmanager's protocol)."""

    name: str

    def send(self, alerts: list[dict[str, object]]) -> None: ...


def wall_clock() -> pd.Timestamp:
    """Now, in UTC."""
    return pd.Timestamp.now(tz="UTC")


def _utc(value: object) -> pd.Timestamp:
    """A time as UTC-aware (a naive one is UTC, as the warehouse stores them)."""
    ts = pd.Timestamp(value)  # type: ignore[arg-type]
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _iso(value: object) -> str | None:
    if value is None or pd.isna(value):
        return None
    return pd.Timestamp(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class JsonlSink:
    """Appends one JSON object per alert transition to a file: once each. A run stopped after
    its lines went in but before it recorded them delivered sends them again next run; the
    deliveries already at the file's end are then left out (a file, unlike a receiver, can
    be asked what it got)."""

    path: Path
    name: str = "jsonl"

    def send(self, alerts: list[dict[str, object]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        there = self._delivered_at_end()
        text = "".join(json.dumps(a, default=str, sort_keys=True) + "\n" for a in alerts
                       if a.get("delivery_id") is None or a["delivery_id"] not in there)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(text)

    def _delivered_at_end(self) -> set[str]:
        """The delivery ids of the whole lines in the file's last ``JSONL_TAIL`` bytes."""
        try:
            with self.path.open("rb") as fh:
                start = max(fh.seek(0, 2) - JSONL_TAIL, 0)
                fh.seek(start)
                tail = fh.read().split(b"\n")
        except FileNotFoundError:
            return set()
        ids = set()
        for line in tail[1 if start else 0:]:  # (the first is cut where the read starts mid-file)
            try:
                ids.add(str(json.loads(line)["delivery_id"]))
            except (ValueError, KeyError, TypeError):
                continue
        return ids


JSONL_TAIL = 1 << 20  # how far back a re-sent batch is looked for: thousands of alerts


def redact(url: str) -> str:
    """``scheme://host[:port]/...``: a URL fit for logs, errors and the warehouse (its
    credentials, path and query may be secret: a Slack hook's path is its key)."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        parts, port = None, ""
    if parts is None or not parts.scheme or not parts.hostname:  # no scheme: "host/path" reads as a path
        rest = url.split("://", 1)[-1]
        host = re.split(r"[/?#]", rest, maxsplit=1)[0].rsplit("@", 1)[-1]
        return f"{url.split('://', 1)[0] + '://' if '://' in url else ''}{host}/..."
    return f"{parts.scheme}://{parts.hostname}{port}/..."


ATTEMPT_TIMEOUTS = 3  # one attempt's whole exchange (connect, send, answer) in timeouts at most


def _post(url: str, body: object, timeout_s: float, retries: int, backoff_s: float) -> None:
    """POST JSON, retrying transport errors and 5xx/429; raise after the last attempt.
    The error names the URL redacted, never whole."""
    last: str = ""
    shown = redact(url)
    for attempt in range(retries + 1):
        try:
            status, text = _exchange(url, body, timeout_s)
            if status < 300:
                return
            last = f"HTTP {status}: {text}"
            if status < 500 and status != 429:
                break  # a client error will not fix itself by retrying
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, OSError) as exc:  # (UnicodeError is a ValueError)
            last = f"{type(exc).__name__}: {exc}"
        if attempt < retries:
            time.sleep(backoff_s * 2**attempt)
    raise RuntimeError(f"delivery to {shown} failed: {_scrubbed(last, url)}")


SECRET_SEGMENT = 8  # a path segment this long may be a key (a Slack hook's are 9 to 24 characters)


def _scrubbed(text: str, url: str) -> str:
    """A receiver's answer or an error as one line fit to show: tags and line breaks gone, and
    the URL's path, query, credentials and any long path segment in it (a 404 page echoes
    the path asked for: a Slack hook's key) replaced by '...'."""
    text = " ".join(re.sub(r"<[^>]*>", " ", text).split())
    try:
        parts = urlsplit(url)
        secrets = [url, parts.path + ("?" + parts.query if parts.query else ""), parts.path, parts.query,
                   parts.password or "", parts.username or ""]
        secrets += [seg for seg in parts.path.split("/") if len(seg) >= SECRET_SEGMENT]
    except ValueError:
        secrets = [url]
    for secret in sorted({s for s in secrets if s and s != "/"}, key=len, reverse=True):
        text = text.replace(secret, "...").replace(quote(secret, safe="/"), "...")
    return printable(text)


def _exchange(url: str, body: object, timeout_s: float) -> tuple[int, str]:
    """One POST: its status, and the start of the body when it is an error. The status is the
    answer: a success's body is not read. httpx's timeouts are per read, so a receiver that
    trickles its headers or body could hold the run, and its claim on these alerts, for ever;
    the whole exchange gets ``ATTEMPT_TIMEOUTS`` timeouts, after which it is abandoned (a late
    answer from an abandoned send is never read; the alerts stay pending and go again)."""
    out: dict[str, object] = {}

    def go() -> None:
        try:
            with httpx.stream("POST", url, json=body, timeout=timeout_s) as resp:
                out["answer"] = (resp.status_code, "" if resp.status_code < 300 else _start_of(resp, timeout_s))
        except BaseException as exc:  # handed to the caller's thread, whatever it is
            out["error"] = exc

    worker = threading.Thread(target=go, name="headroom-alert-send", daemon=True)
    worker.start()
    worker.join(ATTEMPT_TIMEOUTS * timeout_s)
    if worker.is_alive():
        raise httpx.TimeoutException(f"no whole answer within {ATTEMPT_TIMEOUTS * timeout_s:g} s")
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["answer"]  # type: ignore[return-value]


def _start_of(resp: httpx.Response, timeout_s: float, limit: int = 200) -> str:
    """Up to ``limit`` characters of a response's body, as much as arrives within ``timeout_s``."""
    deadline, got = time.monotonic() + timeout_s, b""
    for chunk in resp.iter_bytes():
        got += chunk
        if len(got) >= limit or time.monotonic() > deadline:
            break
    return got.decode("utf-8", "replace")[:limit]


@dataclass(frozen=True)
class WebhookSink:
    """A generic JSON webhook: ``{"source": "headroom", "alerts": [...]}``."""

    url: str
    timeout_s: float = 5.0
    retries: int = 2
    backoff_s: float = 0.2
    name: str = "webhook"

    def send(self, alerts: list[dict[str, object]]) -> None:
        _post(self.url, {"source": "headroom", "alerts": alerts}, self.timeout_s, self.retries, self.backoff_s)


@dataclass(frozen=True)
class AlertmanagerSink:
    """Prometheus Alertmanager API v2: ``POST {base}/api/v2/alerts`` with postable alerts."""

    base_url: str
    generator_url: str = "headroom://detect"
    timeout_s: float = 5.0
    retries: int = 2
    backoff_s: float = 0.2
    hold: pd.Timedelta = pd.Timedelta(hours=1)  # a firing alert's endsAt: at least sent_at + hold
    name: str = "alertmanager"
    resends_firing: bool = True
    # Alertmanager ends an alert at endsAt on its own clock: a replay's run time (the data's
    # clock, months back) plus hold would arrive already ended, so hold runs from the later
    clock: Callable[[], pd.Timestamp] = wall_clock

    def send(self, alerts: list[dict[str, object]]) -> None:
        body = []
        for a in alerts:
            if a["status"] == "escalated":  # the old label set ends now, the new one fires
                body.append(self.postable({**a, "status": "resolved", "severity": a["previous_severity"],
                                           "ends_at": a["sent_at"]}))
                body.append(self.postable({**a, "status": "firing"}))
            else:
                body.append(self.postable(a))
        _post(self.base_url.rstrip("/") + "/api/v2/alerts", body, self.timeout_s, self.retries, self.backoff_s)

    def postable(self, a: dict[str, object]) -> dict[str, object]:
        """One alert in Alertmanager's postableAlert shape (labels and annotations are strings)."""
        labels = {str(k): str(v) for k, v in dict(a.get("labels") or {}).items()}  # type: ignore[arg-type]
        labels.update({
            "alertname": f"headroom_{a['kind']}", "kind": str(a["kind"]), "entity": str(a["entity"]),
            "severity": str(a["severity"]), "fingerprint": str(a["fingerprint"]),
        })
        annotations = {"summary": str(a.get("summary") or ""), "runbook": str(a.get("runbook") or "")}
        if a.get("probability") is not None:
            annotations["probability"] = f"{float(a['probability']):.3f}"  # type: ignore[arg-type]
        body: dict[str, object] = {
            "labels": labels, "annotations": annotations, "startsAt": _iso(a["starts_at"]),
            "generatorURL": self.generator_url,
        }
        if a["status"] == "resolved":
            ends = a["ends_at"]
        else:  # active until the next runs re-send it, and at least to the end of a predicted window
            held = [max(_utc(a["sent_at"]), _utc(self.clock())) + self.hold] if a.get("sent_at") else []
            window = [_utc(a["window_end"])] if a.get("window_end") else []
            ends = max(held + window) if held or window else None
        if ends is not None:
            # Alertmanager refuses (400) an alert that ends before it starts, and with it the batch
            ends = max(_utc(ends), _utc(a["starts_at"])) if a.get("starts_at") else ends
            body["endsAt"] = _iso(ends)
        return body


def sinks_from_settings(jsonl: Path | None, webhook: str | None, alertmanager: str | None) -> list[Sink]:
    """The configured sinks, in a fixed order. A setting that can never work (a URL that is
    not http(s), a JSONL path that is a folder) raises ValueError instead of leaving every
    alert pending run after run.

    Each sink is named for its target (``jsonl:<path>``, ``webhook:<host>#<hash of the URL>``,
    ``alertmanager:<host>#<hash>``: a URL's path or credentials may be secret), so a new file
    or receiver hears the alerts already firing once, and what one target was sent says
    nothing of another."""
    for what, url in (("webhook", webhook), ("alertmanager", alertmanager)):
        if url:
            check_url(what, url)
    if jsonl and Path(jsonl).is_dir():
        raise ValueError(f"alert JSONL path {jsonl} is a folder; name a file")
    for parent in Path(jsonl).parents if jsonl else ():
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"alert JSONL path {jsonl}: {parent} is a file, not a folder")
    sinks: list[Sink] = []
    if jsonl:
        sinks.append(JsonlSink(Path(jsonl), name=f"jsonl:{Path(jsonl).resolve()}"))
    if webhook:
        sinks.append(WebhookSink(webhook, name=url_sink_name("webhook", webhook)))
    if alertmanager:
        sinks.append(AlertmanagerSink(alertmanager, name=url_sink_name("alertmanager", alertmanager.rstrip("/"))))
    return sinks


def check_appendable(path: Path) -> None:
    """ValueError naming the path when this user cannot append to it now: the file, or the
    nearest folder of it that exists, is not writable (permissions, a read-only mount)."""
    try:
        check_writable(path, append=True)
    except OutputError as exc:
        raise ValueError(f"alert JSONL path {exc}") from None


def check_url(what: str, url: str) -> None:
    """ValueError, naming the setting and the URL redacted, for a URL no POST can reach."""
    # a space or a control character never reaches a receiver: httpx refuses it at every send
    if any(c.isspace() or not c.isprintable() for c in url):
        shown = printable(redact(url))
        raise ValueError(f"{what} URL {shown} holds a space or a control character")
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"{what} URL {redact(url)} must start with http:// or https://")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"{what} URL {redact(url)} is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise ValueError(f"{what} URL {redact(url)} names no host")
    try:  # a host no resolver can take (an empty or 64+ character label, a bad punycode one)
        httpx.URL(url).host  # noqa: B018 - decodes a punycode label, raising on a bad one
        parts.hostname.encode("idna")
    except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
        raise ValueError(f"{what} URL {redact(url)}: its host is not a valid name "
                         f"({printable(' '.join(str(exc).split()))[:120]})") from None


def url_sink_name(kind: str, url: str) -> str:
    """``<kind>:<host[:port]>#<8 hex of sha256(url)>``: one name per URL, with no path,
    query or credentials in it (a Slack hook's path is its secret)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{kind}:{parts.hostname or '?'}{port}#{hashlib.sha256(url.encode()).hexdigest()[:8]}"
