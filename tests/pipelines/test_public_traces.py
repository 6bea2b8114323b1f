"""The public traces load through `headroom ingest` (run with HEADROOM_DATASETS set)."""
from __future__ import annotations

import pytest

from pipelines import cli
from pipelines.store import warehouse

pytestmark = pytest.mark.datasets


def test_bitbrains_raw_files_load_with_gwa_t12(datasets_dir, db_path, capsys):
    raw = sorted((datasets_dir / "bitbrains-rnd-vm-utilization" / "raw_gwa_t12_2013-07").glob("*.csv.gz"))[:2]
    assert cli.main(["ingest", "--kind", "utilization", "--format", "gwa-t12", "--cluster", "bitbrains",
                     "--pool", "rnd", "--db", str(db_path), *map(str, raw)]) == 0
    with warehouse.open_warehouse(db_path) as con:
        n, nodes = con.execute("SELECT count(*), count(DISTINCT node_id) FROM utilization").fetchone()
    assert n > 10_000 and nodes == 2


@pytest.mark.parametrize("source,rel,kind", [
    ("aws-spot", "aws-spot-us-east-1-2015/aws_spot_price_history_us-east-1_c3-m3-r3.csv.gz", "spot-prices"),
    ("azure-pdm", "azure-pdm-telemetry/PdM_telemetry_machines1-10_2015Q1.csv.gz", "telemetry"),
    ("nab", "nab-cloud-cpu-anomaly/realAWSCloudwatch/ec2_cpu_utilization_24ae8d.csv", "utilization"),
])
def test_converted_traces_load(datasets_dir, tmp_path, db_path, source, rel, kind):
    out = tmp_path / "conv"
    assert cli.main(["convert", "--from", source, "--out", str(out), str(datasets_dir / rel)]) == 0
    target = out / f"{kind.replace('-', '_')}.csv"
    assert cli.main(["ingest", "--kind", kind, "--strict", "--db", str(db_path), str(target)]) == 0
