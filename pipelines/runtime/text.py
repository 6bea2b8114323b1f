"""Names and messages from inputs, made safe to show: one rule for the console, plots and logs."""
from __future__ import annotations


def printable(text: object) -> str:
    """``text`` with every character that does not print (a control, an escape code, a
    right-to-left override, a zero-width space, a binary file's undecodable bytes) as '?'."""
    return "".join(c if c.isprintable() and c != "\ufffd" else "?" for c in str(text))
