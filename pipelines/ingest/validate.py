"""Validation of raw input rows in SQL, driven by a KindSpec.

The input is the ``_raw`` temp table of the contract's columns (text, or DOUBLE for the
numeric ones when the reader already typed them) whose ``rowid`` is the record's
position in the file. The output types every column and adds ``_reason``: NULL for a
good row, else each problem found, naming the column and the value. Keeping this in
DuckDB keeps ingest close to the speed of DuckDB's own CSV reader."""
from __future__ import annotations

import unicodedata

from pipelines.ingest.contract import KindSpec


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def lit(text: str) -> str:
    """A quoted SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _shown(expr: str) -> str:
    """The offending value, quoted and cut short, for a reject reason."""
    return f"'''' || left(coalesce(CAST({expr} AS VARCHAR), ''), 40) || ''''"


def _sci(x: float) -> str:
    """1e+15 as 1e15: a SQL literal, and what a message shows."""
    mantissa, exponent = f"{x:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def _has_offset(t: str) -> str:
    # ISO dates hold '-' only in their first 10 characters, so a '-' later is an offset; two
    # letters in a row are a zone name (CET, UTC, America/New_York), which a plain cast drops
    return (f"(contains({t}, '+') OR right({t}, 1) IN ('Z', 'z') OR contains(substr({t}, 12), '-') "
            f"OR regexp_matches({t}, '[A-Za-z]{{2}}'))")


def parse_timestamp_sql(expr: str) -> str:
    """SQL turning text into naive UTC: ISO-8601 with or without an offset, or epoch s / ms.

    A plain cast is tried first because it is ~4x cheaper than the time-zone-aware one,
    but it silently drops offsets, so strings with one always take the aware path."""
    num = f"TRY_CAST({expr} AS DOUBLE)"
    # NaN, infinity and numbers past any timestamp (>= 1e15 ms) are no time: NULL, a reject
    epoch = (
        f"CASE WHEN NOT isfinite({num}) OR abs({num}) >= 1e15 THEN NULL "
        f"WHEN abs({num}) >= 1e11 THEN make_timestamp(CAST({num} * 1000 AS BIGINT)) "
        f"WHEN {num} IS NOT NULL THEN make_timestamp(CAST({num} * 1000000 AS BIGINT)) END"
    )
    # what DuckDB's cast refuses but RFC 3339 or `date +'%F %T %z'` write: a lower-case z, a
    # space before the offset (tried only where the plain cast fails)
    spaced = rf"regexp_replace(regexp_replace({expr}, '\s+([+-][0-9]|[zZ]$)', '\1'), 'z$', 'Z')"
    aware = f"coalesce(TRY_CAST({expr} AS TIMESTAMPTZ), TRY_CAST({spaced} AS TIMESTAMPTZ))"
    return (
        f"CASE WHEN {_has_offset(expr)} THEN CAST({aware} AT TIME ZONE 'UTC' AS TIMESTAMP) "
        f"WHEN TRY_CAST({expr} AS TIMESTAMP) IS NOT NULL THEN TRY_CAST({expr} AS TIMESTAMP) "
        f"ELSE {epoch} END"
    )


# the longest name (cluster, pool, node, device, ...) taken: an Azure resource id fits
MAX_NAME = 256

def name_problem(value: str, slash: bool = False) -> str | None:
    """Why ``value`` cannot be a name, as the row check says it (None: it can). ``slash``: a
    cluster or pool, which a '/' would move into another series."""
    name = value.strip()
    if not name:
        return "missing"
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in value):  # a tab at the end stays in the rows
        return "a control or invisible character in " + repr(value[:40])
    if len(name) > MAX_NAME:
        return f"longer than {MAX_NAME} characters"
    if slash and "/" in name:
        return "cluster and pool names cannot contain '/'"
    return None


# what pandas' nanosecond timestamps can hold, whole years: a row outside would load and
# then break every step that reads the warehouse into pandas
TS_MIN, TS_MAX = "1678-01-01", "2262-01-01"


def _ts_reason(col: str, blank: str, out: str, raw: str) -> str:
    return (f"CASE WHEN {blank} THEN '{col}: missing' "
            f"WHEN {out} IS NULL THEN '{col}: unparseable timestamp ' || {_shown(raw)} "
            f"WHEN {out} < TIMESTAMP '{TS_MIN}' OR {out} >= TIMESTAMP '{TS_MAX}' THEN '{col}: timestamp ' "
            f"|| {_shown(raw)} || ' outside the years {TS_MIN[:4]}-{int(TS_MAX[:4]) - 1}' END")


def checked_sql(spec: KindSpec, source: str = "_raw", typed: frozenset[str] = frozenset(),
                positions: bool = True) -> str:
    """SELECT over ``source`` of ``_idx``, the typed contract columns, ``_reason`` and
    ``_key`` (a hash of the key, for the duplicate check). ``typed`` names the columns the
    reader already typed: numeric ones as DOUBLE, the timestamp as TIMESTAMPTZ.
    ``positions``: ``source`` is a table whose rowid is the record's position (else NULL)."""
    inner: list[str] = ["rowid AS _idx" if positions else "CAST(NULL AS BIGINT) AS _idx"]
    reasons: list[str] = []
    for col in spec.columns:
        raw, out = q("r_" + col), q(col)
        inner.append(f"{q(col)} AS {raw}")
        blank = f"({raw} IS NULL)" if col in typed else f"({raw} IS NULL OR trim({raw}) = '')"
        if col == spec.timestamp and col in typed:
            # TIMESTAMPTZ holds UTC microseconds: this is the naive UTC instant, for free
            inner.append(f"CASE WHEN isfinite({q(col)}) THEN make_timestamp(epoch_us({q(col)})) END AS {out}")
            reasons.append(_ts_reason(col, blank, out, raw))
        elif col == spec.timestamp:
            inner.append(f"{parse_timestamp_sql('trim(' + q(col) + ')')} AS {out}")
            reasons.append(_ts_reason(col, blank, out, raw))
        elif col in spec.numeric or col in spec.optional_numeric:
            inner.append(f"{q(col) if col in typed else 'TRY_CAST(trim(' + q(col) + ') AS DOUBLE)'} AS {out}")
            missing = f"WHEN {blank} THEN '{col}: missing' " if col in spec.numeric else f"WHEN {blank} THEN NULL "
            neg = f"WHEN {out} < 0 THEN '{col}: negative ' || {_shown(raw)} " if col in spec.non_negative else ""
            reasons.append(
                f"CASE {missing}WHEN {out} IS NULL THEN '{col}: not a number ' || {_shown(raw)} "
                f"WHEN NOT isfinite({out}) THEN '{col}: not finite ' || {_shown(raw)} "
                f"WHEN abs({out}) >= {_sci(spec.max_abs)} THEN '{col}: {_sci(spec.max_abs)} or beyond, no plausible "
                f"value ' || "
                f"{_shown(raw)} {neg}END"
            )
        else:
            value = f"NULLIF(trim({q(col)}), '')"
            inner.append(f"{'lower(' + value + ')' if col in spec.enums else value} AS {out}")
            if col not in spec.optional_text:
                reasons.append(f"CASE WHEN {blank} THEN '{col}: missing' END")
            if col not in spec.enums:  # a name: one a reader can see whole, and print
                reasons.append(
                    f"CASE WHEN regexp_matches({out}, '[\\p{{Cc}}\\p{{Cf}}]') THEN '{col}: a control or invisible "
                    f"character in ' || {_shown(out)} WHEN length({out}) > {MAX_NAME} THEN '{col}: longer than "
                    f"{MAX_NAME} characters' END")
            if col in spec.enums:
                allowed = ", ".join(lit(v) for v in spec.enums[col])
                reasons.append(
                    f"CASE WHEN {out} NOT IN ({allowed}) THEN '{col}: unknown value ' || {_shown(raw)} "
                    f"|| ' (expected {'|'.join(spec.enums[col])})' END"
                )
    checks = [f"CASE WHEN {cond} THEN {lit(msg)} END" for cond, msg in spec.checks]
    mid = f"SELECT *, NULLIF(concat_ws('; ', {', '.join(reasons)}), '') AS _r0 FROM (SELECT {', '.join(inner)} FROM {source})"
    # rule checks only speak when the row's values are themselves valid
    reason = f"coalesce(_r0, NULLIF(concat_ws('; ', {', '.join(checks)}), ''))" if checks else "_r0"
    cols = ", ".join(q(c) for c in spec.columns)
    key = ", ".join(q(c) for c in spec.key)
    return f"SELECT _idx, {cols}, {reason} AS _reason, hash({key}) AS _key FROM ({mid})"


def conflicting_keys_sql(spec: KindSpec, checked: str) -> str:
    """Keys that occur more than once among good rows with different values."""
    key = ", ".join(q(c) for c in spec.key)
    others = [c for c in spec.columns if c not in spec.key]
    differs = " OR ".join(
        f"count(DISTINCT {q(c)}) > 1 OR (count({q(c)}) > 0 AND count({q(c)}) < count(*))" for c in others
    )
    having = f"count(*) > 1 AND ({differs})" if others else "false"
    return f"SELECT {key} FROM {checked} WHERE _reason IS NULL GROUP BY {key} HAVING {having}"


def has_repeated_keys_sql(checked: str) -> str:
    """One row, TRUE when some key may occur twice among good rows.

    Counts distinct key hashes: a hash collision can only say TRUE wrongly, and TRUE
    just sends the file down the exact (slower) path."""
    return f"SELECT count(DISTINCT _key) < count(*) FROM {checked} WHERE _reason IS NULL"
