//! The store's tables, created on open (`CREATE TABLE IF NOT EXISTS`); columns added later
//! are added to older stores by `Store::open`.

/// The schema version stored in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 3;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    config TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    code_hash TEXT NOT NULL,
    params TEXT NOT NULL,
    code_path TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (run_id, code_hash, params)
);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    split TEXT NOT NULL,
    grp TEXT,
    line INTEGER
);
CREATE TABLE IF NOT EXISTS draws (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    candidate_id INTEGER NOT NULL,
    label TEXT NOT NULL,
    task_id TEXT NOT NULL,
    inclusion_prob REAL NOT NULL,
    UNIQUE (run_id, candidate_id, label, task_id)
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    candidate_id INTEGER NOT NULL,
    task_id TEXT NOT NULL,
    trial_index INTEGER NOT NULL,
    outcome REAL NOT NULL,
    status TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    model_calls INTEGER NOT NULL DEFAULT 0,
    wall_ms INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1,
    trace_path TEXT,
    error TEXT,
    answer TEXT,
    task_key TEXT NOT NULL DEFAULT '',
    finished_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (candidate_id, task_id, trial_index)
);
CREATE INDEX IF NOT EXISTS trials_task ON trials (task_id);
CREATE TABLE IF NOT EXISTS model_calls (
    id INTEGER PRIMARY KEY,
    trial_key TEXT NOT NULL,
    candidate_id INTEGER,
    task_id TEXT,
    trial_index INTEGER,
    endpoint TEXT,
    seq INTEGER,
    started_at_ms INTEGER,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    latency_ms INTEGER,
    cache_hit INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    retries INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    upstream_error TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS estimates (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    candidate_id INTEGER NOT NULL,
    label TEXT NOT NULL,
    value REAL,
    se REAL,
    ci_low REAL,
    ci_high REAL,
    estimator TEXT NOT NULL,
    tasks_used INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (run_id, epoch, kind)
);
";
