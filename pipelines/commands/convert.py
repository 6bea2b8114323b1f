"""``headroom convert``: turn a public trace into contract CSVs that ``ingest`` loads."""
from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from pipelines.public_data import CONVERTERS

    p = sub.add_parser("convert", help="convert a public trace (Bitbrains, AWS, GCP, PdM, Titan, NAB) to the input contract")
    p.add_argument("--from", dest="source", required=True, choices=sorted(CONVERTERS))
    p.add_argument("--out", required=True, help="folder for <kind>.csv files")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(func=run_convert)


def run_convert(args: argparse.Namespace) -> int:
    import pandas as pd

    from pipelines.cli import CliError
    from pipelines.outputs import write_csv
    from pipelines.public_data import CONVERTERS

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frames: dict[str, list[pd.DataFrame]] = {}
    for raw in args.paths:
        path = Path(raw)
        if not path.is_file():
            raise CliError(f"{path}: no such file", 2)
        try:
            for kind, frame in CONVERTERS[args.source](path).items():
                frames.setdefault(kind, []).append(frame)
        except (KeyError, ValueError, pd.errors.ParserError) as exc:
            raise CliError(f"{path}: not a {args.source} file ({exc})", 2) from exc
    for kind, parts in frames.items():
        target = out / f"{kind.replace('-', '_')}.csv"
        write_csv(pd.concat(parts, ignore_index=True), target)
        print(f"{target}: {sum(len(p) for p in parts)} rows (ingest with --kind {kind})")
    return 0
