"""AWS ``describe-spot-price-history`` JSON -> spot-prices contract rows."""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pandas as pd

from pipelines.ingest.adapters import IngestFileError, load_json

log = logging.getLogger(__name__)


def aws_json_frame(path: Path) -> pd.DataFrame:
    """``aws ec2 describe-spot-price-history`` output -> spot-prices contract rows."""
    doc = load_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("SpotPriceHistory"), list):
        raise IngestFileError(path, "not a describe-spot-price-history document (no SpotPriceHistory list)")
    rows = []
    for n, given in enumerate(doc["SpotPriceHistory"], start=1):
        rec = given if isinstance(given, dict) else {}  # an element that is no object: every field missing
        zone = str(rec.get("AvailabilityZone") or "")
        region = _aws_region(zone)
        rows.append({
            "ts": rec.get("Timestamp"), "provider": "aws", "region": region, "zone": zone,
            "instance_type": rec.get("InstanceType"), "product": rec.get("ProductDescription"),
            "price": rec.get("SpotPrice"), "_line": n, "_raw": json.dumps(given, sort_keys=True, default=str),
        })
    return pd.DataFrame(rows, columns=["ts", "provider", "region", "zone", "instance_type", "product", "price", "_line", "_raw"])


def _aws_region(zone: str) -> str:
    """``us-east-1a`` -> ``us-east-1``; Local and Wavelength Zones (``us-west-2-lax-1a``,
    ``us-east-1-wl1-bos-wlz-1``) belong to their parent region too."""
    found = re.match(r"^([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+)", zone)
    if found:
        return found.group(1)
    return zone[:-1] if zone and zone[-1].isalpha() else zone
