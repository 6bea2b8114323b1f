"""What each stage's result says, as lines of text: one style for ``headroom run`` (a stage's
lines as it finishes) and for ``train``, ``detect`` and ``plan`` alone (``--json`` gives the
result itself instead)."""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable


def json_text(doc: object, default: Callable[[object], object] = str, **kwargs: object) -> str:
    """``json.dumps`` that writes a NaN or infinite number as null: Python's ``NaN`` is not
    JSON, and a strict reader (JavaScript's, jq's) refuses the whole document."""
    def finite(v: object) -> object:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [finite(x) for x in v]
        return v

    return json.dumps(finite(doc), default=lambda v: finite(default(v)), allow_nan=False, **kwargs)


def seconds_text(seconds: float) -> str:
    """``(4.2 s)``, or ``(1 min 12 s)`` from a minute on."""
    return f"({seconds:.1f} s)" if seconds < 60 else f"({int(seconds // 60)} min {round(seconds % 60)} s)"


def skipped_text(rows_read: int) -> str:
    """Why a file was skipped: its content was ingested before (a header-only file: any
    earlier one with no rows, which is nothing to load either way)."""
    return ("no rows (the same content as an earlier file: nothing to load)" if rows_read == 0
            else "skipped (already ingested)")


def ingest_file_lines(r: dict) -> list[str]:
    """One ingested file: its counts, and a few reasons rows were refused."""
    from pipelines.ingest.loading import counts_text

    if r["status"] == "skipped":
        return [f"  {r['path']}: {skipped_text(r['rows_read'])}"]
    counts = counts_text(r["rows_read"], r["rows_loaded"], r["rows_rejected"], r.get("swallowed") or (),
                         r.get("reject_lines") or 0)
    return [f"  {r['path']}: {counts}",
            *(f"    {reason}" for reason in r.get("sample_reasons") or [])]


def ingest_lines(ing: dict) -> list[str]:
    """What the warehouse holds after ingest: rows per table (the empty ones left out) and
    the time span per kind."""
    summary = ing.get("summary") or {}
    rows = {t: n for t, n in (summary.get("rows") or {}).items() if n}
    lines = ["the warehouse holds " + (", ".join(f"{t} {n:,}" for t, n in rows.items()) or "empty")]
    for table, (lo, hi) in (summary.get("spans") or {}).items():
        lines.append(f"  {table:<18} {lo or '-'} .. {hi or '-'}")
    return lines


def train_lines(t: dict) -> list[str]:
    """Champion and backtest WAPE of every model per group, the series left out, what was written."""
    lines = [f"{t.get('series', '?')} series, data cutoff {t.get('data_cutoff')}, run {t.get('run_id')}",
             f"  {'group':<10} {'champion':<16} {'WAPE':>7}   all models (backtest WAPE)"]
    for group, g in t.get("groups", {}).items():
        scores = ", ".join(f"{m} {w:.3f}" if w is not None else f"{m} -" for m, w in g.get("scores", {}).items())
        wape = f"{g['wape']:>7.3f}" if g.get("wape") is not None else f"{'-':>7}"
        lines.append(f"  {group:<10} {g['champion']:<16} {wape}   {scores}")
        lines.extend(f"    {line}" for line in g.get("left_out", []))
    rows = t.get("rows") or {}
    if rows:
        lines.append("  written: " + ", ".join(f"{k} {v:,}" for k, v in rows.items()))
    if t.get("retired"):
        lines.append(f"  retired {t['retired']} champion(s) of older data that this run did not replace "
                     "(series left out now)")
    if t.get("superseded"):
        lines.append(f"  not champions: a train on newer data holds {', '.join(t['superseded'])}")
    return lines


def model_line(m: dict) -> str:
    """``reused (trained 2026-03-01 06:00)``, ``retrained (why)`` or ``none yet (why)``."""
    if m.get("model") == "reused":
        return f"reused (trained {m.get('trained_at')})"
    if m.get("model") == "retrained":
        return f"retrained ({m.get('why')})"
    return f"none yet ({m.get('why')})"


def detect_lines(d: dict) -> list[str]:
    """Per detector what it did, then the alerts firing and where they went."""
    lines = []
    for kind in ("bursts", "faults", "spikes"):
        if kind in d:
            r = dict(d[kind])
            model = r.pop("model", None)
            note = r.pop("threshold_note", None)
            said = (f"skipped: {r['skipped']}" if "skipped" in r else
                    ", ".join(f"{k} {v}" for k, v in r.items()))
            lines.append(f"  {kind:<7} {said}")
            if isinstance(model, dict):
                lines.append(f"  {'':<7} spike model: {model_line(model)}")
            if note:
                lines.append(f"  {'':<7} {note}")
    sent = ", ".join(f"{n} to {sink}" for sink, n in (d.get("delivered") or {}).items()) or "no sink"
    lines.append(f"  alerts firing {d.get('firing')}, delivered {sent}, pending {d.get('pending_deliveries')}")
    for sink, n in (d.get("pending_unconfigured") or {}).items():
        lines.append(f"  {n} deliveries wait for {sink}, not configured in this run (sent if it is again)")
    for sink, why in (d.get("delivery_failed") or {}).items():
        lines.append(f"  {sink} failed, its alerts stay pending: {why}")
    return lines


def plan_lines(p: dict) -> list[str]:
    """The plan's rows, its headline per pool, the split and the spot choice."""
    from pipelines.plan.planning import current_text, saving_text, split_text, spot_text
    from pipelines.runtime.money import money

    lines = [f"run {p['run_id']} (data up to {p.get('data_cutoff')}): "
             + ", ".join(f"{k} {v}" for k, v in p["rows"].items())]
    for h in p.get("headline", []):
        lines.append(f"  {h['unique_id']:<20} recommended: {h['text']}")
    for a in p["allocation"]:
        lines.append(f"  {a['unique_id']:<20} split private/public/edge {a['private']:.2f}/{a['public']:.2f}/"
                     f"{a['edge']:.2f} ({split_text(a)}), {money(a['monthly_cost'])}/month, "
                     f"{saving_text(a['savings_vs_default'], a.get('expected_savings'))}{current_text(a)}")
    for sp in p.get("spot", []):
        lines.append(f"  {sp['unique_id']:<20} {spot_text(sp)}")
    return lines


def replay_lines(r: dict) -> list[str]:
    """Each pool's replayed week: planned against a reactive autoscaler, both against the oracle."""
    lines = ["cost / oracle and steps under-provisioned, planned vs a reactive autoscaler:"]
    for x in r.get("replays", []):
        lines.append(f"  {x['unique_id']:<20} planned {x['planned_cost_vs_oracle']:.2f}x "
                     f"{x['planned_underprovisioned_pct']:.2f}%, reactive_80 {x['reactive_80_cost_vs_oracle']:.2f}x "
                     f"{x['reactive_80_underprovisioned_pct']:.2f}%"
                     + ("" if x["beyond_frontier"] else " (a reactive autoscaler does as well)"))
    for pool, why in r.get("not_replayed", {}).items():
        lines.append(f"  {pool:<20} not replayed: {why}")
    return lines


def report_lines(r: dict) -> list[str]:
    return [f"{r['html']} (+ {len(r['files'])} recommendation exports)"]


STAGE_LINES: dict[str, Callable[[dict], list[str]]] = {
    "ingest": ingest_lines, "train": train_lines, "detect": detect_lines, "plan": plan_lines,
    "replay": replay_lines, "report": report_lines,
}


def stage_lines(stage: str, result: object, seconds: float | None = None) -> list[str]:
    """``<stage>: ...`` then its lines; a failed stage says so in one line."""
    took = f" {seconds_text(seconds)}" if seconds is not None else ""
    if isinstance(result, dict) and "failed" in result:
        return [f"{stage}: FAILED{took}: {result['failed']}"]
    render = STAGE_LINES.get(stage)
    if render is None or not isinstance(result, dict):
        return [f"{stage}{took}: " + json_text(result)]
    body = render(result)
    if body and not body[0].startswith("  "):  # the first line is the stage's headline
        return [f"{stage}{took}: {body[0]}", *body[1:]]
    return [f"{stage}{took}:", *body]


def print_result(result: dict, as_json: bool, stage: str) -> None:
    """A command's result: the JSON document (``--json``) or its text lines."""
    if as_json:
        print(json_text(result, indent=2))
    else:
        print("\n".join(stage_lines(stage, result)))
    sys.stdout.flush()
