"""Reading a CSV file line by line and record by record: text whatever the bytes, Python's
csv module without its field size limit, physical lines longer than :data:`MAX_LINE_BYTES`
refused without being held whole, and the words of the rejects these give (a line too long,
a quote that never closes)."""
from __future__ import annotations

import csv
import gzip
import io
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAX_LINE_BYTES = 2_000_000  # DuckDB's reader's max_line_size: a longer physical line is a reject, never loaded


def _unlimited_fields() -> None:
    """Lift Python's csv field limit (128 KiB): a field of any size is read (a line over
    :data:`MAX_LINE_BYTES` is refused by line length instead). The limit is process-wide."""
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return
        except OverflowError:  # a C long of 32 bits (Windows)
            limit //= 2


def csv_reader(lines: Iterator[str] | list[str] | io.TextIOBase, delimiter: str) -> Iterator[list[str]]:
    """``csv.reader`` without the field size limit."""
    _unlimited_fields()
    return csv.reader(lines, delimiter=delimiter)


def too_long_reason(size: int) -> str:
    """The reject reason of a physical line longer than :data:`MAX_LINE_BYTES`."""
    return (f"line too long: {size} bytes, over the {MAX_LINE_BYTES} a line may hold "
            "(not loaded; the file's other lines are)")


def open_text(path: Path) -> io.TextIOBase:
    # the caller closes the wrapper, which closes the raw file
    raw = gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")  # noqa: SIM115
    # errors="replace": the header and the raw text of rejects must show, whatever the bytes
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")


@dataclass(frozen=True)
class TooLong:
    """A record with a physical line over :data:`MAX_LINE_BYTES`: its fields were never read."""

    size: int  # bytes of the longest such line

    @property
    def reason(self) -> str:
        return too_long_reason(self.size)


PREVIEW = 1000  # characters of an overlong line kept as its reject's raw text


def _physical_lines(fh: io.TextIOBase, too_long: dict[int, tuple[int, str]]) -> Iterator[str]:
    """The file's lines, none longer than :data:`MAX_LINE_BYTES`: a longer one is read through
    in pieces (never held whole), noted in ``too_long`` (line number -> its size in bytes and
    its start) and given to the csv reader as a bare line end."""
    n = 0
    while line := fh.readline(MAX_LINE_BYTES + 1):
        n += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(("\n", "\r")):
            preview, size = line[:PREVIEW], len(line.encode("utf-8", "replace"))
            while line and not line.endswith(("\n", "\r")):
                line = fh.readline(1 << 20)
                size += len(line.rstrip("\r\n").encode("utf-8", "replace"))
            too_long[n] = (size, preview)
            line = "\n"
        yield line


def csv_records(path: Path, delimiter: str) -> Iterator[tuple[int, str, list[str] | TooLong]]:
    """(first line, raw text, fields) of each record after the header, streamed. A quoted
    field may hold newlines, so a record can span lines: its line is the one it starts on.
    A record with a line over :data:`MAX_LINE_BYTES` comes as :class:`TooLong` instead of its
    fields, its raw text the line's first :data:`PREVIEW` characters."""
    with open_text(path) as fh:
        buf: list[str] = []
        too_long: dict[int, tuple[int, str]] = {}

        def lines() -> Iterator[str]:
            for line in _physical_lines(fh, too_long):
                buf.append(line)
                yield line

        reader = csv_reader(lines(), delimiter)
        next(reader, None)
        buf.clear()
        too_long.clear()  # an overlong header fails as a header
        start = reader.line_num + 1
        for row in reader:
            text = "".join(buf).rstrip("\r\n")
            buf.clear()
            if too_long:
                over = [too_long.pop(k) for k in sorted(too_long) if k <= reader.line_num]
                if over:
                    size, preview = max(over)
                    yield start, preview, TooLong(size)
                    start = reader.line_num + 1
                    continue
            yield start, text, row
            start = reader.line_num + 1


def line_starts(path: Path) -> tuple[Callable[[int, str], int], int]:
    """Physical line of a reader reject from its 1-based line byte position and its text
    (DuckDB's own line numbers miscount after quoted newlines and blank lines), and how
    many physical lines the file has."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as fh:  # the bytes the reader saw (decompressed)
        data = np.frombuffer(fh.read(), dtype=np.uint8)
    # a line ends at \n, or at a \r not followed by \n (old Mac files), as csv_records counts
    cr_alone = (data == 13) & np.append(data[1:] != 10, True)
    newlines = np.flatnonzero((data == 10) | cr_alone)

    def line_of(byte_position: int, text: str) -> int:
        # newlines before the line's first byte, then the blank lines the reader folded into it
        before = int(np.searchsorted(newlines, max(byte_position - 1, 0), side="left"))
        lead = text[:len(text) - len(text.lstrip("\r\n"))]
        return before + 1 + lead.replace("\r\n", "\n").replace("\r", "\n").count("\n")

    return line_of, len(newlines) + int(bool(len(data)) and not (newlines.size and newlines[-1] == len(data) - 1))


def unterminated_reason(line: int, swallowed: int) -> str:
    """The reject reason of a record whose quote never closes: it ran on to the end of the file."""
    return (f"unterminated quote: the quoted value opened on line {line} never closes, so the {swallowed} "
            "line(s) after it were read into it and none of them loaded (close the quote and ingest again)")


UNTERMINATED = re.compile(r"^unterminated quote: the quoted value opened on line (\d+) never closes, so the (\d+) ")


def swallowed_by(reason: str) -> tuple[int, int] | None:
    """(line, lines swallowed) of an unterminated-quote reject's reason, else None."""
    found = UNTERMINATED.match(reason)
    return (int(found.group(1)), int(found.group(2))) if found else None
