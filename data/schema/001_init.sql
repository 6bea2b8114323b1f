-- 001: the starting warehouse. Every table has a natural key and every write is an
-- upsert on it, so re-running a flow over the same input changes nothing.
-- The four big fact tables (utilization, device_telemetry, failures, spot_prices) name
-- their key in a comment instead of a PRIMARY KEY: DuckDB's ART index made bulk loads
-- 5x slower (benchmarks/ingest.py), so pipelines/ingest.py keeps the key itself
-- (delete the keys a file replaces, then insert, in one transaction; duplicates inside
-- a file are rejected before that).

CREATE TABLE IF NOT EXISTS utilization (
    ts        TIMESTAMP NOT NULL,
    cluster   VARCHAR   NOT NULL,
    pool      VARCHAR   NOT NULL,
    node_id   VARCHAR   NOT NULL,
    resource  VARCHAR   NOT NULL,   -- gpu | cpu | mem
    used      DOUBLE    NOT NULL,   -- units: GPUs, cores, GiB
    capacity  DOUBLE    NOT NULL,
    -- natural key: (ts, node_id, resource)
);

CREATE TABLE IF NOT EXISTS device_telemetry (
    ts        TIMESTAMP NOT NULL,
    device_id VARCHAR   NOT NULL,
    node_id   VARCHAR,
    metric    VARCHAR   NOT NULL,
    value     DOUBLE    NOT NULL,
    -- natural key: (ts, device_id, metric)
);

CREATE TABLE IF NOT EXISTS failures (
    ts           TIMESTAMP NOT NULL,
    device_id    VARCHAR   NOT NULL,
    node_id      VARCHAR,
    failure_type VARCHAR   NOT NULL,
    -- natural key: (ts, device_id, failure_type)
);

CREATE TABLE IF NOT EXISTS spot_prices (
    ts            TIMESTAMP NOT NULL,
    provider      VARCHAR   NOT NULL,
    region        VARCHAR   NOT NULL,
    zone          VARCHAR   NOT NULL,
    instance_type VARCHAR   NOT NULL,
    product       VARCHAR   NOT NULL,
    price         DOUBLE    NOT NULL,   -- holds until the next row of the same series
    -- natural key: (ts, provider, zone, instance_type, product)
);

CREATE TABLE IF NOT EXISTS instance_catalog (
    provider          VARCHAR NOT NULL,
    region            VARCHAR NOT NULL,
    instance_type     VARCHAR NOT NULL,
    location          VARCHAR NOT NULL,   -- private | public | edge
    resource          VARCHAR NOT NULL,   -- gpu | cpu | mem: what `units` counts
    units             DOUBLE  NOT NULL,
    vcpus             DOUBLE,
    memory_gb         DOUBLE,
    on_demand_price   DOUBLE,
    reserved_1y_price DOUBLE,
    reserved_3y_price DOUBLE,
    tflops            DOUBLE,
    PRIMARY KEY (provider, region, instance_type)
);

CREATE TABLE IF NOT EXISTS ingest_batches (
    batch_id      VARCHAR PRIMARY KEY,
    kind          VARCHAR   NOT NULL,
    source_format VARCHAR   NOT NULL,
    path          VARCHAR   NOT NULL,
    sha256        VARCHAR   NOT NULL,
    rows_read     BIGINT    NOT NULL,
    rows_loaded   BIGINT    NOT NULL,
    rows_rejected BIGINT    NOT NULL,
    status        VARCHAR   NOT NULL,   -- loaded
    started_at    TIMESTAMP NOT NULL,
    finished_at   TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS rejects (
    batch_id VARCHAR NOT NULL,
    line     BIGINT  NOT NULL,   -- 1-based line in the file (record number for JSON/Parquet)
    path     VARCHAR NOT NULL,
    raw      VARCHAR,
    reason   VARCHAR NOT NULL,
    PRIMARY KEY (batch_id, line)
);

CREATE TABLE IF NOT EXISTS models (
    model_id     VARCHAR PRIMARY KEY,
    kind         VARCHAR   NOT NULL,
    target       VARCHAR   NOT NULL,   -- the series group the model serves
    series       VARCHAR,              -- JSON list of unique_ids
    data_cutoff  TIMESTAMP NOT NULL,
    params       VARCHAR,              -- JSON
    metrics      VARCHAR,              -- JSON backtest metrics
    artifact     BLOB,
    is_champion  BOOLEAN   NOT NULL DEFAULT FALSE,
    created_at   TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS forecasts (
    run_id    VARCHAR   NOT NULL,
    unique_id VARCHAR   NOT NULL,
    ds        TIMESTAMP NOT NULL,
    model     VARCHAR   NOT NULL,
    model_id  VARCHAR,
    mean      DOUBLE    NOT NULL,
    lo_80     DOUBLE, hi_80 DOUBLE, lo_95 DOUBLE, hi_95 DOUBLE,
    PRIMARY KEY (run_id, unique_id, ds, model)
);

CREATE TABLE IF NOT EXISTS backtests (
    run_id    VARCHAR   NOT NULL,
    unique_id VARCHAR   NOT NULL,
    ds        TIMESTAMP NOT NULL,
    cutoff    TIMESTAMP NOT NULL,
    model     VARCHAR   NOT NULL,
    y         DOUBLE,
    mean      DOUBLE    NOT NULL,
    lo_80     DOUBLE, hi_80 DOUBLE, lo_95 DOUBLE, hi_95 DOUBLE,
    PRIMARY KEY (run_id, unique_id, ds, cutoff, model)
);

CREATE TABLE IF NOT EXISTS alerts (
    fingerprint  VARCHAR PRIMARY KEY,
    kind         VARCHAR   NOT NULL,   -- burst | hardware_fault | price_spike
    entity       VARCHAR   NOT NULL,
    severity     VARCHAR   NOT NULL,
    probability  DOUBLE,
    window_start TIMESTAMP,
    window_end   TIMESTAMP,
    summary      VARCHAR,
    runbook      VARCHAR,
    status       VARCHAR   NOT NULL,   -- firing | resolved
    starts_at    TIMESTAMP NOT NULL,
    ends_at      TIMESTAMP,
    updated_at   TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS alert_deliveries (
    fingerprint VARCHAR   NOT NULL,
    sink        VARCHAR   NOT NULL,
    status      VARCHAR   NOT NULL,   -- the alert status that was delivered: firing | resolved
    state       VARCHAR   NOT NULL,   -- pending | delivered
    attempts    INTEGER   NOT NULL DEFAULT 0,
    last_error  VARCHAR,
    updated_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (fingerprint, sink, status)
);

CREATE TABLE IF NOT EXISTS detector_state (
    detector  VARCHAR   NOT NULL,
    unique_id VARCHAR   NOT NULL,
    last_ts   TIMESTAMP,
    state     VARCHAR,              -- JSON
    PRIMARY KEY (detector, unique_id)
);

CREATE TABLE IF NOT EXISTS recommendations (
    run_id      VARCHAR   NOT NULL,
    kind        VARCHAR   NOT NULL,   -- reservation | prescale | allocation
    key         VARCHAR   NOT NULL,
    payload     VARCHAR   NOT NULL,   -- JSON
    model_id    VARCHAR,
    data_cutoff TIMESTAMP,
    created_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, kind, key)
);
