"""Progress on a terminal, silence in a pipe, and stage lines as each stage finishes."""
from __future__ import annotations

import io
import sys

import pytest

from pipelines.runtime import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_draws_on_a_terminal_and_nothing_in_a_pipe(monkeypatch):
    for stream, drawn in ((_Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        with progress.progress_bar("fits", "done") as bar:
            for i in range(3):
                bar(i + 1, 3)
        assert ("fits" in stream.getvalue()) is drawn, stream.getvalue()


def test_listeners_hear_each_stage_in_order_and_only_while_open():
    heard = []
    with progress.stage_listener(lambda stage, result, seconds: heard.append((stage, result, seconds))):
        progress.stage_done("ingest", {"files": []}, 1.5)
        progress.stage_done("train", {"failed": "x"}, 0.1)
    progress.stage_done("plan", {}, 0.2)  # nobody listens any more: nothing heard, no error
    assert heard == [("ingest", {"files": []}, 1.5), ("train", {"failed": "x"}, 0.1)]


def test_stage_lines_say_the_stage_its_time_and_a_failure_in_one_line():
    from pipelines.commands.summaries import seconds_text, stage_lines

    assert stage_lines("train", {"failed": "HistoryError: too short"}, 0.25) == [
        "train: FAILED (0.2 s): HistoryError: too short"]
    lines = stage_lines("detect", {"bursts": {"events": 1, "fired": 1}, "delivered": {"jsonl:a": 1},
                                   "firing": 1, "pending_deliveries": 0}, 3.0)
    assert lines == ["detect (3.0 s):", "  bursts  events 1, fired 1",
                     "  alerts firing 1, delivered 1 to jsonl:a, pending 0"]
    assert seconds_text(75) == "(1 min 15 s)"
    assert stage_lines("custom", {"a": 1}) == ['custom: {"a": 1}']  # a stage with no text of its own


def test_json_results_write_nan_and_infinity_as_null(capsys):
    """``plan --json`` printed ``"current_fleet_cost": NaN`` (no fleet priced): not JSON."""
    import json

    import numpy as np

    from pipelines.commands.summaries import json_text, print_result

    doc = {"plans": [{"current_fleet_cost": float("nan"), "cost": np.float64(1.5)}], "n": (np.float64("inf"), 2)}
    print_result(doc, as_json=True, stage="plan")
    back = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert back == {"plans": [{"current_fleet_cost": None, "cost": 1.5}], "n": [None, 2]}
    assert json_text({"t": object.__new__(type("T", (), {"__str__": lambda self: "x"}))}) == '{"t": "x"}'
