//! Opening a store read-only: to watch a running evaluation, or to view a run directory
//! the user cannot write.
//!
//! A WAL-mode database is read through its `-shm` index, which SQLite creates beside it
//! when it is missing; in a directory the user cannot write it cannot, and the first query
//! fails ("attempt to write a readonly database", or "unable to open database file" when a
//! `-wal` is there). `mode=ro` is the same read-only open and fails the same way. SQLite's
//! documented way (wal.html, "Read-Only Databases") is the `immutable=1` URI parameter: the
//! file is read without locks, without `-shm` and without its `-wal`. That is safe only
//! here: no `-shm` means no writer has the database open, and an empty or absent `-wal`
//! means the database file holds every committed transaction. A `-wal` with content (a
//! writer stopped before it checkpointed) would be ignored, so that case is an error
//! naming the fix instead of a silently stale view.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::{cause, is_damage, Store, StoreError};

impl Store {
    /// Opens an existing store read-only (e.g. to watch a running evaluation), immutable
    /// when it is in a directory the user cannot write (see the module's comment). A file
    /// without hevo's tables (empty, truncated, corrupt) is [`StoreError::NotAStore`].
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let plain = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY);
        let conn = match plain.and_then(with_trials) {
            Err(e) if needs_immutable(path, &e) => {
                if has_content(&sibling(path, "-wal")) {
                    return Err(StoreError::WalUnreadable {
                        path: path.to_path_buf(),
                    });
                }
                Connection::open_with_flags(
                    immutable_uri(path),
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
                )
                .and_then(with_trials)
            }
            r => r,
        };
        let not_a_store = |why: String| StoreError::NotAStore {
            path: path.to_path_buf(),
            why,
        };
        match conn {
            Ok(Some(conn)) => Ok(Store {
                conn,
                path: path.to_path_buf(),
            }),
            Ok(None) => Err(not_a_store(
                "it holds no trials table: empty or not hevo's".into(),
            )),
            Err(e) if is_damage(&e) => Err(not_a_store(cause(&e))),
            Err(source) => Err(StoreError::Open {
                path: path.to_path_buf(),
                source,
            }),
        }
    }
}

/// The connection when its database has hevo's `trials` table (SQLite reads the file, and
/// needs its `-shm`, only at this first query), None when it has not.
fn with_trials(conn: Connection) -> rusqlite::Result<Option<Connection>> {
    let _ = conn.busy_timeout(std::time::Duration::from_secs(10));
    let tables: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'trials'",
        [],
        |r| r.get(0),
    )?;
    Ok((tables > 0).then_some(conn))
}

/// Whether `e` is SQLite failing to create the `-shm` of the database at `path`: a
/// read-only or cannot-open error while there is no `-shm`.
fn needs_immutable(path: &Path, e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
    ) && !sibling(path, "-shm").exists()
}

/// `path` with `suffix` appended to its file name (`hevo.db-wal`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether the file at `path` exists and is not empty.
fn has_content(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// The `file:` URI of `path` (absolute, every byte but unreserved ones and `/`
/// percent-encoded) with `immutable=1`.
fn immutable_uri(path: &Path) -> String {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for &b in abs.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri += &format!("%{b:02X}");
        }
    }
    uri + "?immutable=1"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uri_escapes_what_a_uri_would_read_as_syntax() {
        let uri = immutable_uri(Path::new("/no/such dir/r?#%ü/hevo.db"));
        assert_eq!(
            uri,
            "file:/no/such%20dir/r%3F%23%25%C3%BC/hevo.db?immutable=1"
        );
    }
}
