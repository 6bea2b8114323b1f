"""``headroom convert``: turn a public trace into contract CSVs that ``ingest`` loads."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)
# a change log says nothing of an offer that was withdrawn: its last price simply stops
# changing. An offer silent this long before the newest snapshot given is taken as withdrawn
RETIRED_AFTER_DAYS = 365


def register(sub: argparse._SubParsersAction) -> None:
    from pipelines.ingest.convert import CONVERTERS

    p = sub.add_parser("convert", help="convert a public trace (Bitbrains, AWS, GCP, Alibaba, PdM, Titan, NAB) to the input contract")
    p.add_argument("--from", dest="source", required=True, choices=sorted(CONVERTERS))
    p.add_argument("--out", required=True, help="folder for <kind>.csv files")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="the trace's files as published (docs/input-contract.md lists each source's)")
    p.set_defaults(func=run_convert)


def run_convert(args: argparse.Namespace) -> int:
    import pandas as pd

    from pipelines.commands.errors import CliError
    from pipelines.ingest.convert import CONVERTERS
    from pipelines.ingest.convert_io import RecordError, SidecarError
    from pipelines.runtime.outputs import write_set

    out = Path(args.out)
    missing = [p for p in args.paths if not Path(p).is_file()]
    if missing:
        raise CliError(f"{missing[0]}: " + ("is a folder; give the files in it" if Path(missing[0]).is_dir()
                                            else "no such file"), 2)
    seen: dict[Path, str] = {}
    for p in args.paths:  # its rows would be written twice
        if Path(p).resolve() in seen:
            raise CliError(f"{p}: given twice (as {seen[Path(p).resolve()]} too)", 2)
        seen[Path(p).resolve()] = p
    frames: dict[str, list[pd.DataFrame]] = {}
    what = f"{'an' if args.source[0] in 'aeiou' else 'a'} {args.source} file"
    # oldest first (the public files carry their year or date in the name), so that where
    # files overlap, the newest price of an instance wins
    for raw in sorted(args.paths, key=lambda p: (Path(p).name, str(p))):  # whatever order they were typed in
        path = Path(raw)
        try:
            for kind, frame in CONVERTERS[args.source](path).items():
                frames.setdefault(kind, []).append(frame)
        except SidecarError as exc:  # a file read beside it: named itself
            raise CliError(f"{exc} (read beside {path} for --from {args.source})", 2) from exc
        except KeyError as exc:  # a column the source's files have is missing
            name = str(exc.args[0]) if exc.args else ""
            detail = f"no column {exc}" if " " not in name else " ".join(name.split())[:300]  # pandas' own words
            raise CliError(f"{path}: not {what} ({detail})", 2) from exc
        except (OSError, EOFError, UnicodeDecodeError) as exc:  # truncated or not-really gzip, unreadable
            raise CliError(f"{path}: unreadable ({exc})", 2) from exc
        except RecordError as exc:  # a bad value: its line in the file
            raise CliError(f"{path}: not {what} ({exc.at(path)})", 2) from exc
        except (ValueError, TypeError, pd.errors.ParserError) as exc:
            detail = " ".join(str(exc).split())[:300]  # one line, whatever the parser said
            raise CliError(f"{path}: not {what} ({detail})", 2) from exc
    done: dict[Path, tuple[str, pd.DataFrame]] = {}
    for kind, parts in frames.items():
        frame = pd.concat(parts, ignore_index=True)
        if kind == "catalog":  # one price per instance: the newest (by its snapshot time where known, else file)
            if "_as_of" in frame:
                frame = frame.sort_values("_as_of", kind="stable", na_position="first")
            frame = frame.drop_duplicates(["provider", "region", "instance_type"], keep="last").sort_index()
            if "_as_of" in frame:
                frame = _drop_retired(frame)
            frame = frame.drop(columns="_as_of", errors="ignore")
        done[out / f"{kind.replace('-', '_')}.csv"] = (kind, frame)
    from pipelines.ingest.loading import kind_named

    # a file named for a kind that this run does not write (utilization-old.csv, spot-prices.csv),
    # left in the folder by an earlier run, would be ingested beside these as if it belonged to them
    stale = sorted(p for p in out.rglob("*") if p.is_file() and kind_named(p.name) and p not in done) \
        if out.is_dir() else []
    for old in stale:
        log.warning("%s was not written by this convert (an earlier run left it?): ingesting the folder "
                    "would load it with these files; remove it, or convert into an empty folder", old)
    for target in done:
        if target.resolve() in seen:  # it would be replaced, and a rerun could not read it
            raise CliError(f"{target}: --out {out} would replace the input {seen[target.resolve()]}; convert into "
                           "another folder", 2)
    # one set, its folder made only once every file converted: a failure (a full disk)
    # leaves no folder, and never some kinds written without the others
    write_set({target: (lambda tmp, f=frame: f.to_csv(tmp, index=False)) for target, (_, frame) in done.items()})
    for target, (kind, frame) in done.items():
        print(f"{target}: {len(frame)} rows (ingest with --kind {kind})")
    return 0


def _drop_retired(catalog: pd.DataFrame) -> pd.DataFrame:
    """The catalog without offers whose newest price is more than ``RETIRED_AFTER_DAYS``
    older than the newest snapshot given (GCP's log: 2024's GPU-less a3-megagpu-8g prices
    in 30 regions, 2023's A100s in northamerica-northeast2), named on the console."""
    import pandas as pd

    when = pd.to_datetime(catalog["_as_of"], utc=True, errors="coerce")
    old = when < when.max() - pd.Timedelta(days=RETIRED_AFTER_DAYS)
    if old.any():
        shown = ", ".join(f"{r.instance_type} {r.region} ({w:%Y-%m-%d})" for r, w in
                          zip(catalog[old].head(3).itertuples(), when[old].head(3)))
        log.warning("%d offer(s) last priced over %d days before the newest snapshot (%s), taken as withdrawn and "
                    "left out of the catalog: %s%s", int(old.sum()), RETIRED_AFTER_DAYS, f"{when.max():%Y-%m-%d}",
                    shown, ", ..." if old.sum() > 3 else "")
    return catalog[~old]
