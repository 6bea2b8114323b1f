-- 090: what headroom prune deleted, and from when. A replay (detect --as-of) before a prune's
-- history cut would fire again the alerts resolved before it and deleted since: it is refused.
-- A prune that deletes nothing writes no row, so a second prune on the same data changes nothing.
CREATE TABLE IF NOT EXISTS prunes (
    history_cut  TIMESTAMP NOT NULL,   -- derived rows older than this went (data time)
    clock        TIMESTAMP NOT NULL,   -- the data time the ages were measured from
    keep_days    INTEGER,              -- NULL: history kept, readings pruned
    data_days    INTEGER,              -- NULL: readings kept
    deleted      VARCHAR   NOT NULL,   -- JSON {table: rows deleted}
    pruned_at    TIMESTAMP NOT NULL,   -- wall clock
    PRIMARY KEY (clock, pruned_at)
);
