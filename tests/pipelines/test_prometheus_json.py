"""Prometheus ``query_range`` JSON: the streamed read (a series at a time) gives exactly the
frame, reject texts, rows, rejects and warnings of the whole-document read, and leaves every
file it does not take as it is to that read, whose errors say what is wrong."""
from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.ingest import loading as ingest
from pipelines.ingest import prometheus, prometheus_json
from pipelines.ingest.adapters import IngestFileError
from tests.pipelines.ingest_files import write

T0 = 1767225600
GIB = 1024 ** 3


def _doc(results: list, **extra) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": results}, **extra}


def _series(metric: dict, values: list) -> dict:
    return {"metric": metric, "values": values}


def _cpu(host: str, cpu: str, mode: str, values: list, **labels) -> dict:
    return _series({"__name__": "node_cpu_seconds_total", "instance": f"{host}:9100", "cpu": cpu, "mode": mode,
                    **labels}, [[T0 + 60 * i, v] for i, v in enumerate(values)])


def _mem(name: str, host: str, values: list, **labels) -> dict:
    return _series({"__name__": name, "instance": f"{host}:9100", **labels},
                   [[T0 + 60 * i, v] for i, v in enumerate(values)])


def _gpu(host: str, gpu: str, values: list, **labels) -> dict:
    return _series({"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": host, "gpu": gpu, **labels},
                   [[T0 + 60 * i, v] for i, v in enumerate(values)])


CLEAN = [
    _cpu("n1", "0", "user", ["0", "30", "60"]), _cpu("n1", "0", "idle", ["0", "30", "60"]),
    _mem("node_memory_MemTotal_bytes", "n1", [str(64 * GIB)] * 3),
    _mem("node_memory_MemAvailable_bytes", "n1", [str(40 * GIB)] * 3),
    _gpu("n1", "0", ["50", "60", "70"], UUID="GPU-a"), _gpu("n1", "1", ["5", "6", "7"], UUID="GPU-b"),
    {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "n1", "gpu": "0"}, "values": [[T0, "61"]]},
]

# each kind of bad or odd sample the ingest tests use, and JSON that only a careful reader
# reads as json.load does
BAD = {
    "nan and inf values": [_gpu("n1", "0", ["50", "NaN"]), _gpu("n1", "1", ["70", "80"]),
                           _cpu("n1", "0", "user", ["0", "30", "+Inf", "90"]), _cpu("n1", "0", "idle", ["0", "30", "60", "90"])],
    "samples without a time": [_series({"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": h, "gpu": "0"},
                                       [[T0, "50"], [None, "60"]]) for h in ("n1", "n2")],
    "not pairs": [_series({"__name__": "DCGM_FI_DEV_GPU_TEMP"}, [[T0, "60"]]),
                  _series({"__name__": "DCGM_FI_DEV_GPU_TEMP", "UUID": "GPU-1"},
                          [[T0, "61"], "oops", [None, "62"], [1e30, "63"], [T0], [], [T0, "1", "x"], None, {"a": 1}])],
    "copies and repeats": [_gpu("n1", "0", ["50", "60"], job="a"), _gpu("n1", "0", ["50", "70"], job="b"),
                           _series({"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n3", "gpu": "0"},
                                   [[T0, "5"], [T0, "6"], [T0 + 60, "7"]])],
    "memory alone or apart": [_mem("node_memory_MemTotal_bytes", "n1", [str(64 * GIB)] * 2),
                              _series({"__name__": "node_memory_MemAvailable_bytes", "instance": "n1:9100"},
                                      [[T0, str(40 * GIB)], [T0 + 90, "NaN"]])],
    "no metric name": [_series({"Hostname": "n1", "gpu": "0"}, [[T0, "50"]]), _gpu("n1", "0", ["1"])],
    "empty": [],
    "empty series": [{"metric": {}}, {"values": []}, _series({}, []), _gpu("n1", "0", ["1"])],
    "times of every JSON type": [_series({"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n1", "gpu": "0"},
                                         [[T0, "1"], [T0 + 0.5, "2"], [float(T0 + 60), "3"], [-0.0, "4"], [0.0, "5"],
                                          [2 ** 70, "6"], [str(T0 + 120), "7"], [True, "8"], [float("nan"), "9"],
                                          [float("inf"), "10"]]),
                                 _series({"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n2", "gpu": "0"},
                                         [[T0 + 0.25, "1"], [T0 + 60.25, "2"]])],
    "values of every JSON type": [_gpu("n1", "0", [50, 50.0, None, True, "é\u2028\\", "", [1], {"v": 1}, 2 ** 70]),
                                  _gpu("n1", "1", ["50"] * 9)],
    "a lone surrogate": [_gpu("n1", "0", ["\ud800", "1"]), _gpu("n\udc00", "1", ["2", "3"])],  # no UTF-8 for it
    "labels of other types": [_series({"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n1", "gpu": 0, "UUID": None},
                                      [[T0, "1"]]), _gpu("n1", "1", ["2"], cluster="c/1")],
}


def _write(path: Path, doc: object, *, text: str | None = None, indent: int | None = None, gz: bool = False) -> Path:
    return write(path, json.dumps(doc, indent=indent) if text is None else text, gz=gz)


def _assert_same(path: Path, chunk: int = 1 << 22) -> pd.DataFrame:
    """The streamed and the whole-document read give equal samples, labels, value types and
    reject texts."""
    streamed = prometheus_json._prom_samples_streamed(path, chunk)
    loaded = prometheus_json._prom_samples_loaded(path)
    pd.testing.assert_frame_equal(streamed.frame, loaded.frame)
    pd.testing.assert_frame_equal(streamed.labels, loaded.labels)
    for frame_s, frame_l, cols in ((streamed.frame, loaded.frame, ("ts", "value")),
                                   (streamed.labels, loaded.labels, ("gpu", "uuid"))):
        for col in cols:
            assert [type(x) for x in frame_s[col]] == [type(x) for x in frame_l[col]], col
            # NaN == NaN in assert_frame_equal: the text of a float must match too (-0.0, nan, inf)
            assert [repr(x) for x in frame_s[col]] == [repr(x) for x in frame_l[col]], col
    lines = streamed.frame["_line"]
    assert [streamed.raw_of(line) for line in lines] == [loaded.raw_of(line) for line in lines]
    return streamed.frame


@pytest.mark.parametrize("case", ["clean", *BAD])
def test_streamed_read_equals_the_whole_document_read(tmp_path, case):
    doc = _doc(CLEAN if case == "clean" else BAD[case])
    p = _write(tmp_path / "p.json", doc)
    s = _assert_same(p)
    assert len(s) == sum(len(r.get("values") or []) for r in doc["data"]["result"])
    for chunk in (1, 2, 3, 7, 64):  # every value cut at every place a read can end
        _assert_same(p, chunk)


@pytest.mark.parametrize("layout", ["indented", "keys reordered", "other keys", "byte order mark", "gzip",
                                    "duplicate status", "undecodable bytes", "nan and infinity literals"])
def test_streamed_read_takes_any_layout_json_load_takes(tmp_path, layout):
    results = CLEAN + BAD["not pairs"]
    doc, text = _doc(results), None
    if layout == "indented":
        text = json.dumps(doc, indent=2)
    elif layout == "keys reordered":
        text = json.dumps({"data": {"result": results, "resultType": "matrix"}, "status": "success"})
    elif layout == "other keys":  # numbers too, which a read cut off at the wrong place would misread
        doc = {"status": "success", "isPartial": False, "took": 1234.5e-3, "data": {"resultType": "matrix",
               "result": results, "stats": {"timings": {"evalTotalTime": 0.1}, "samples": [[1, 2]]}, "n": -10.25},
               "warnings": ["a,]"], "infos": []}
    elif layout == "byte order mark":
        text = "\ufeff" + json.dumps(doc)
    elif layout == "duplicate status":
        text = '{"status": "error", ' + json.dumps(doc)[1:]
    elif layout == "nan and infinity literals":
        text = json.dumps(_doc([_gpu("n1", "0", ["1", "2"])] + [_series({"__name__": "x"}, [[float("nan"), "1"]])],
                                stats={"x": float("-inf")}))
    p = tmp_path / ("p.json.gz" if layout == "gzip" else "p.json")
    if layout == "undecodable bytes":  # read as U+FFFD, both ways
        p.write_bytes(json.dumps(doc).encode().replace(b'"GPU-a"', b'"GPU-\xff\xfe"'))
    else:
        _write(p, doc, text=text, gz=layout == "gzip")
    for chunk in (1 << 22, 1, 2, 3, 5, 7):
        _assert_same(p, chunk)


BROKEN = {
    "truncated": lambda t: t[:-40],
    "trailing comma in a series": lambda t: t.replace('"61"]]', '"61"],]'),
    "trailing comma in an ignored key": lambda t: t[:-1] + ', "stats": {"a": [1,]}}',
    "bare inf in an ignored key": lambda t: t[:-1] + ', "stats": inf}',
    "more after the document": lambda t: t + " {}",
    "empty file": lambda t: "",
    "a series that is not one": lambda t: t.replace('"result": [', '"result": ["x", '),
    "null metric": lambda t: t.replace('"result": [', '"result": [{"metric": null, "values": []}, '),
    "null values": lambda t: t.replace('"result": [', '"result": [{"metric": {}, "values": null}, '),
    "data twice": lambda t: t[:-1] + ', "data": {"resultType": "matrix", "result": []}}',
    "result twice": lambda t: t.replace('"result": [', '"result": [], "result": [', 1),
    "result an object": lambda t: t.replace('"result": [', '"result": {}, "x": [', 1),
    "an error response": lambda t: json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}),
    "a vector": lambda t: t.replace('"matrix"', '"vector"'),
    "data a list": lambda t: json.dumps({"status": "success", "data": [1]}),
    "not an object": lambda t: "[1, 2]",
    "single quotes": lambda t: t.replace('"status"', "'status'"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_what_the_streamed_read_leaves_is_read_whole_with_the_same_outcome(tmp_path, case):
    p = tmp_path / "p.json"
    p.write_text(BROKEN[case](json.dumps(_doc(CLEAN))), encoding="utf-8")
    with pytest.raises((prometheus_json.Unusual, ValueError)):
        prometheus_json._prom_samples_streamed(p)
    try:
        expected = prometheus_json._prom_samples_loaded(p)
    except IngestFileError as exc:
        with pytest.raises(IngestFileError, match=re.escape(str(exc))):
            prometheus_json.read_samples(p)
        return
    got = prometheus_json.read_samples(p)  # json.load keeps the last of a key given twice
    pd.testing.assert_frame_equal(got.frame, expected.frame)
    pd.testing.assert_frame_equal(got.labels, expected.labels)


def _ingest_outcome(con, path: Path, kind: str, caplog) -> tuple:
    caplog.clear()
    with caplog.at_level("WARNING"):
        r = ingest.ingest_file(con, path, kind, cluster="c", pool="p")
    table = "utilization" if kind == "utilization" else "device_telemetry"
    rows = con.execute(f"SELECT * FROM {table} ORDER BY ALL").df()
    rejects = con.execute("SELECT line, raw, reason FROM rejects ORDER BY line").fetchall()
    warnings = [m.replace(str(path), "FILE") for m in caplog.messages]
    return (r.rows_read, r.rows_loaded, r.rows_rejected, r.sample_reasons), rows, rejects, warnings


@pytest.mark.parametrize("kind", ["utilization", "telemetry"])
def test_ingest_gives_the_same_rows_rejects_and_warnings_either_way(tmp_path, monkeypatch, caplog, kind):
    from pipelines.store import warehouse
    results = [r for case in ("nan and inf values", "samples without a time", "not pairs", "copies and repeats",
                              "memory alone or apart") for r in BAD[case]] + CLEAN
    p = _write(tmp_path / "p.json", _doc(results))
    with warehouse.connect(":memory:") as con:
        streamed = _ingest_outcome(con, p, kind, caplog)

    def refuse(path: Path, chunk: int = 0) -> prometheus_json.Samples:
        raise prometheus_json.Unusual("test")

    monkeypatch.setattr(prometheus_json, "_prom_samples_streamed", refuse)
    with warehouse.connect(":memory:") as con:
        loaded = _ingest_outcome(con, p, kind, caplog)
    assert streamed[0] == loaded[0] and streamed[2] == loaded[2] and streamed[3] == loaded[3]
    pd.testing.assert_frame_equal(streamed[1], loaded[1])
    assert streamed[0][2] > 0 and streamed[3]  # the file did have rejects and warnings


def test_a_gzipped_file_loads_like_the_plain_one(tmp_path, caplog):
    from pipelines.store import warehouse
    results = CLEAN + BAD["nan and inf values"]
    plain = _write(tmp_path / "u.json", _doc(results))
    zipped = _write(tmp_path / "u.json.gz", _doc(results), gz=True)
    _assert_same(zipped)
    with warehouse.connect(":memory:") as con:
        a = _ingest_outcome(con, plain, "utilization", caplog)
    with warehouse.connect(":memory:") as con:
        b = _ingest_outcome(con, zipped, "utilization", caplog)
    assert a[0] == b[0] and a[2] == b[2] and a[3] == b[3] and a[0][1] > 0
    pd.testing.assert_frame_equal(a[1], b[1])


def _fleet(times: list) -> list:
    """Three hosts (one in its own cluster) of GPU and CPU series, with NaN, +Inf, a counter
    reset, a host scraped by two jobs that disagree once, and memory."""
    def at(values: list) -> list:
        return [[t, v] for t, v in zip(times, values)]

    out = []
    for h, labels in (("n1", {}), ("n2", {"cluster": "east"}), ("n0", {})):
        for g in ("0", "1"):
            for job in ("a", "b") if h == "n1" else ("a",):
                util = ["50", "60", "NaN", "70"] if (h, g) == ("n2", "1") else ["10", "20", "30", "40"]
                if job == "b":
                    util = ["10", "20", "31", "40"]
                out.append(_series({"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": h, "gpu": g, "job": job,
                                    **labels}, at(util)))
        for c in ("0", "1"):
            for mode, values in (("idle", ["0", "30", "60", "90"]), ("user", ["10", "40", "5", "+Inf"])):
                out.append(_series({"__name__": "node_cpu_seconds_total", "instance": f"{h}:9100", "cpu": c,
                                    "mode": mode, **labels}, at(values)))
        out.append(_series({"__name__": "node_memory_MemTotal_bytes", "instance": f"{h}:9100", **labels},
                           at([str(64 * GIB)] * 4)))
        out.append(_series({"__name__": "node_memory_MemAvailable_bytes", "instance": f"{h}:9100", **labels},
                           at([str(40 * GIB)] * 3)))
    return out


@pytest.mark.parametrize("times", ["ints", "ints and floats", "a time missing", "a time as text"])
def test_utilization_worked_a_few_hosts_at_a_time_equals_all_at_once(tmp_path, monkeypatch, caplog, times):
    """GPU and CPU sums go a piece of hosts at a time; every row, line, reason, warning and the
    text of every time are what one pass over the whole file gives."""
    from pipelines.ingest.contract import spec_for

    ts = [T0, T0 + 60, T0 + 120, T0 + 180]
    if times == "ints and floats":
        ts = [T0, T0 + 60.5, float(T0 + 120), T0 + 180]
    elif times == "a time missing":
        ts = [T0, None, T0 + 120, T0 + 180]
    elif times == "a time as text":
        ts = [T0, str(T0 + 60), T0 + 120, T0 + 180]
    p = _write(tmp_path / "fleet.json", _doc(_fleet(ts)))

    def frame(piece: int) -> tuple:
        monkeypatch.setattr(prometheus, "_PIECE", piece)
        caplog.clear()
        with caplog.at_level("WARNING"):
            out = prometheus.prometheus_frame(p, spec_for("utilization"), "c", "p")
        raw_of = out.attrs.pop("raw_of")
        return out, [raw_of(line) for line in out["_line"]], list(caplog.messages)

    whole, raws, warnings = frame(1 << 30)
    assert len(whole) and whole["_reject"].notna().any() and warnings
    for piece in (1, 5, 20):
        got, got_raws, got_warnings = frame(piece)
        pd.testing.assert_frame_equal(got, whole)
        assert [repr(x) for x in got["ts"]] == [repr(x) for x in whole["ts"]]
        assert (got_raws, got_warnings) == (raws, warnings)


def test_reading_and_summing_hold_a_small_multiple_of_the_file(tmp_path, monkeypatch):
    """json.load of a query_range response alone takes ~8x the file in Python objects, and
    the samples and sums built from it took ~35x: the streamed read holds one series' JSON
    at a time and the samples in compact columns, and the sums go a few hosts at a time."""
    from pipelines.ingest.contract import spec_for

    rng = np.random.default_rng(0)
    results = [_cpu(f"host{h}", str(c), m, [f"{v:.2f}" for v in np.cumsum(rng.uniform(0, 15, 400))])
               for h in range(20) for c in range(4) for m in ("idle", "user", "system", "iowait")]
    p = _write(tmp_path / "big.json", _doc(results))
    size = p.stat().st_size
    monkeypatch.setattr(prometheus, "_PIECE", 10_000)  # samples: the 128,000 here go in 13 pieces
    tracemalloc.start()
    try:
        samples = prometheus_json.read_samples(p)
        _, read_peak = tracemalloc.get_traced_memory()
        del samples
        tracemalloc.reset_peak()
        out = prometheus.prometheus_frame(p, spec_for("utilization"), "c", "p")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(out) == 20 * 399
    assert read_peak < 4 * size, f"reading: peak {read_peak / size:.1f}x the file"
    assert peak < 8 * size, f"reading and summing: peak {peak / size:.1f}x the file"
