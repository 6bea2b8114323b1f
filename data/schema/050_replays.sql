-- 050: replays of pre-scaling decisions (headroom plan replay, the run's replay stage). One row per
-- strategy of a replay, its scores as JSON; and the capacity the report draws, per step of the span.
-- replay_id names the series and the span: replaying the same span again replaces it.
CREATE TABLE IF NOT EXISTS replays (
    replay_id VARCHAR NOT NULL,
    unique_id VARCHAR NOT NULL,
    span_start TIMESTAMP NOT NULL,
    span_end TIMESTAMP NOT NULL,
    step_seconds DOUBLE NOT NULL,
    instance_units DOUBLE NOT NULL,
    models VARCHAR,
    strategy VARCHAR NOT NULL,
    scores VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (replay_id, strategy)
);
CREATE TABLE IF NOT EXISTS replay_capacity (
    replay_id VARCHAR NOT NULL,
    ts TIMESTAMP NOT NULL,
    demand DOUBLE,
    planned DOUBLE,
    reactive_80 DOUBLE,
    PRIMARY KEY (replay_id, ts)
);
