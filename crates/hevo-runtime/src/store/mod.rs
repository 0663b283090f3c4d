//! The SQLite store of a run directory (`<run>/hevo.db`, WAL mode, one writer).
//!
//! Tables: `runs`, `candidates`, `tasks`, `draws` (what a strategy drew per candidate,
//! with inclusion probabilities),
//! `trials`, `model_calls`, `estimates` and `decisions` (HarnessPro's per-epoch choices: core
//! set, survivors, plans, as JSON). A trial row is written once, when the trial has
//! finished; `(candidate_id, task_id, trial_index)` is unique, so a killed run resumes by
//! running exactly the units that have no row yet. The only row ever replaced is an
//! `infra_error` one (a fault of ours, retried on resume). This module holds SQL only: no
//! processes, no scoring.

mod calls;
mod catalog;
mod decisions;
mod read_only;
mod rows;
mod schema;
#[cfg(test)]
mod tests;
mod trials;

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

pub use self::rows::{EstimateRow, TaskRow, TrialRow};
pub use self::schema::SCHEMA_VERSION;
pub use self::trials::spend_at;

/// The id of the run kept in `run_dir`: the id its store (`hevo.db`) was created with, else
/// (no store yet) its folder's name (`run` for a path without one). Every ledger trial id of
/// the run begins with it (`<run>/c<candidate>/...`, [`crate::model_access::TrialRef`]), and
/// the run's store numbers the candidates of those ids only. Taking it from the store keeps
/// it when the run directory is moved or renamed: resumed there, the run finds its
/// candidates and their trials again instead of running them all a second time.
pub fn run_id(run_dir: &Path) -> String {
    stored_run_id(run_dir).unwrap_or_else(|| {
        run_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into())
    })
}

/// The id of the run kept in the folder `name` inside the run directory `run_dir` (a search's
/// `smoke/` and `test/` stores): the id its store was created with, else `<run>/<name>`,
/// `<run>` being [`run_id`]`(run_dir)`. Its ledger ids (`<run>/<name>/c<candidate>/...`)
/// then never read as the parent run's (`<run>/c<candidate>/...`), whatever the parent's
/// folder is called: a search in `runs/test` keeps its test split's calls apart from its
/// own. (Stores written before this rule were created as the run `name` itself and keep
/// that id.)
pub fn nested_run_id(run_dir: &Path, name: &str) -> String {
    stored_run_id(&run_dir.join(name)).unwrap_or_else(|| format!("{}/{name}", run_id(run_dir)))
}

/// The run recorded in `run_dir`'s store, if it has a readable one. A store holds one run,
/// except one that an older hevo resumed after its directory was moved: that stored every
/// candidate again under the new folder's name and ran its trials again, so the latest run
/// is the one whose candidates are complete.
fn stored_run_id(run_dir: &Path) -> Option<String> {
    latest_run(run_dir, "id")
}

/// The `column` (`id` or `kind`) of the latest run in `run_dir`'s store, if it has a
/// readable one (see [`stored_run_id`]).
fn latest_run(run_dir: &Path, column: &str) -> Option<String> {
    let db = run_dir.join("hevo.db");
    if !db.is_file() {
        return None;
    }
    let store = Store::open_read_only(&db).ok()?;
    store
        .connection()
        .query_row(
            &format!("SELECT {column} FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1"),
            [],
            |r| r.get(0),
        )
        .ok()
}

/// What wrote a run's store, kept in its `runs.kind` column: the command, or the part of a
/// search, whose trials it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    /// A search (`hevo run`), in its run directory.
    Search,
    /// A search's smoke test of its seeds, in `<run>/smoke`.
    Smoke,
    /// A search's test-split evaluation (`hevo finalize`), in `<run>/test`.
    Finalize,
    /// One harness on a suite (`hevo eval`).
    Eval,
}

impl RunKind {
    /// The word stored for it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Search => "search",
            RunKind::Smoke => "smoke",
            RunKind::Finalize => "finalize",
            RunKind::Eval => "eval",
        }
    }

    /// The kind stored as `word`, if it is one.
    fn stored(word: &str) -> Option<RunKind> {
        [
            RunKind::Search,
            RunKind::Smoke,
            RunKind::Finalize,
            RunKind::Eval,
        ]
        .into_iter()
        .find(|k| k.as_str() == word)
    }

    /// How a message names a run of this kind.
    fn describe(self) -> &'static str {
        match self {
            RunKind::Search => "a `hevo run` search",
            RunKind::Smoke => "a search's smoke test",
            RunKind::Finalize => "a search's test-split evaluation",
            RunKind::Eval => "a `hevo eval` run",
        }
    }
}

/// Why a run of `kind` cannot be kept in `run_dir`, if it cannot: its store holds another
/// kind of run. A `hevo eval` given a search's directory would add its harness's trials to
/// the search's store (the search's statistics would count them), and a search given an
/// eval's directory would take the eval's trials for its own.
pub fn run_kind_problem(run_dir: &Path, kind: RunKind) -> Option<String> {
    let stored = latest_run(run_dir, "kind")?;
    if stored == kind.as_str() {
        return None;
    }
    let held = RunKind::stored(&stored)
        .map_or_else(|| format!("a `{stored}` run"), |k| k.describe().to_string());
    Some(format!(
        "run directory `{}` holds {held} (its hevo.db), and {} cannot share its store: pass \
         another run directory (--run-dir), one that is new or holds an earlier run of the \
         same command",
        run_dir.display(),
        kind.describe()
    ))
}

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file is empty, truncated or corrupt, or not a database at all.
    #[error(
        "`{}` is not a readable hevo store ({why}); it is written by `hevo run` and \
         `hevo eval`: if the run directory was copied, copy `hevo.db` with its `hevo.db-wal`; \
         otherwise start a new run with --run-dir (the archive/ keeps every candidate's code)",
        path.display()
    )]
    NotAStore {
        /// The database file.
        path: PathBuf,
        /// What SQLite found.
        why: String,
    },
    /// The database could not be opened or prepared.
    #[error("cannot open the store `{}`: {}", path.display(), cause(source))]
    Open {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// A WAL-mode store in a directory the user cannot write, whose `-wal` holds
    /// transactions: SQLite reads those only through the `-shm` index it would have to
    /// create there.
    #[error(
        "`{}` cannot be read as you: its latest trials are in `hevo.db-wal`, which SQLite \
         reads only by creating `hevo.db-shm` beside it, and you cannot write its directory; \
         run this as the directory's owner, or copy the run directory (with `hevo.db-wal`) \
         to a folder you can write and pass the copy",
        path.display()
    )]
    WalUnreadable {
        /// The database file.
        path: PathBuf,
    },
    /// The database was written by a newer hevo.
    #[error("the store `{}` has schema version {found}; this hevo knows {SCHEMA_VERSION}", path.display())]
    Version {
        /// The database file.
        path: PathBuf,
        /// The version found.
        found: i64,
    },
    /// A query failed.
    #[error("store query ({what}) failed: {}", cause(source))]
    Query {
        /// What was being done.
        what: &'static str,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
}

impl StoreError {
    /// Whether the user must fix something (exit code 2): a file that is not a store, or
    /// one they cannot read where it is.
    pub fn is_user_error(&self) -> bool {
        matches!(
            self,
            StoreError::NotAStore { .. } | StoreError::WalUnreadable { .. }
        )
    }
}

/// SQLite's own message, once (rusqlite's display repeats it with the code's description).
fn cause(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(msg)) => msg.clone(),
        e => e.to_string(),
    }
}

/// Whether SQLite says the file is not a database or is damaged.
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

fn q(what: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Query { what, source }
}

/// An open store. Use one per writer thread.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the store at `path` in WAL mode.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open = |source: rusqlite::Error| match is_damage(&source) {
            true => StoreError::NotAStore {
                path: path.to_path_buf(),
                why: cause(&source),
            },
            false => StoreError::Open {
                path: path.to_path_buf(),
                source,
            },
        };
        let conn = Connection::open(path).map_err(open)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(open)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(open)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::Version {
                path: path.to_path_buf(),
                found: version,
            });
        }
        conn.execute_batch(schema::SCHEMA).map_err(open)?;
        // Columns added to existing tables (nullable or defaulted, so older readers still
        // read them): version 3 keys every trial by its task's content (older rows have no
        // key and are re-run once); a model call's retries and errors came later, then its
        // endpoint, position and start (NULL in older rows) and its prompt-cache writes.
        for (table, column, decl) in [
            ("trials", "task_key", "TEXT NOT NULL DEFAULT ''"),
            ("model_calls", "retries", "INTEGER NOT NULL DEFAULT 0"),
            ("model_calls", "error", "TEXT"),
            ("model_calls", "upstream_error", "TEXT"),
            ("model_calls", "endpoint", "TEXT"),
            ("model_calls", "seq", "INTEGER"),
            ("model_calls", "started_at_ms", "INTEGER"),
            (
                "model_calls",
                "cache_write_tokens",
                "INTEGER NOT NULL DEFAULT 0",
            ),
            (
                "model_calls",
                "cache_write_1h_tokens",
                "INTEGER NOT NULL DEFAULT 0",
            ),
        ] {
            let present: bool = conn
                .query_row(
                    "SELECT COUNT(*) FROM pragma_table_info(?1) WHERE name = ?2",
                    params![table, column],
                    |r| r.get::<_, i64>(0),
                )
                .map_err(open)?
                > 0;
            if !present {
                conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))
                    .map_err(open)?;
            }
        }
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(open)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying connection, for queries this module does not offer.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}
