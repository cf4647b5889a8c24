//! The store's last word when the signal watchdog ends a process whose shutdown overran its
//! grace (crush(1) EXIT STATUS): the database is checkpointed and left in rollback-journal mode,
//! as `Store::close_wal` leaves it, from the watchdog's thread while the store's own thread is
//! stuck elsewhere.
//!
//! That is sound only because the connection is opened in SQLite's serialized mode
//! (`SQLITE_OPEN_FULLMUTEX`): every call on it holds the connection's mutex. The watchdog takes
//! that mutex only if it is free, so it never waits on a stuck thread and never runs beside a
//! call of its owner, which may be a write; then it acts only when no transaction is open and
//! no statement is running. In any other case the `-wal` file stays where it is, which SQLite
//! recovers from at the next open; a checkpoint cut short by the exit would be worse. The mutex
//! is kept until the process ends, so the owner starts nothing more on the connection.

use rusqlite::ffi;
use std::ptr;

/// A connection handle the watchdog may use from its own thread.
pub(super) struct Handle(*mut ffi::sqlite3);

// SAFETY: the handle is of a connection opened with SQLITE_OPEN_FULLMUTEX (serialized: SQLite
// itself serialises calls from several threads), `close` checks that before it uses it, and
// the registration holding it is taken back (`signal::LastWord`) before the connection closes.
unsafe impl Send for Handle {}

impl Handle {
    /// # Safety
    ///
    /// `db` must stay open for as long as the handle may be used: the registration that holds
    /// it is dropped before the connection is.
    pub(super) unsafe fn new(db: *mut ffi::sqlite3) -> Handle {
        Handle(db)
    }

    /// Checkpoints the WAL into the database and leaves WAL mode (which removes the `-wal` and
    /// `-shm` files) when that is safe now; else changes nothing. None: the connection is in
    /// use (or not serialized). Else the connection's mutex stays held until the answer drops
    /// (the watchdog never drops it: the process ends).
    pub(super) fn close(&self) -> Option<Held> {
        let db = self.0;
        // SAFETY: `db` is open (see `new`). sqlite3_db_mutex is NULL unless the connection is
        // serialized; sqlite3_mutex_try does not block. Holding the (recursive) mutex, this
        // thread is the only one using the connection, so the calls below cannot interleave
        // with a call of its owner.
        unsafe {
            let mutex = ffi::sqlite3_db_mutex(db);
            if mutex.is_null() || ffi::sqlite3_mutex_try(mutex) != ffi::SQLITE_OK {
                return None;
            }
            let mut held = Held {
                mutex,
                closed: false,
            };
            if ffi::sqlite3_get_autocommit(db) == 0 {
                // A transaction is open: its owner is between two statements of it.
                return Some(held);
            }
            let mut stmt = ffi::sqlite3_next_stmt(db, ptr::null_mut());
            while !stmt.is_null() {
                if ffi::sqlite3_stmt_busy(stmt) != 0 {
                    return Some(held);
                }
                stmt = ffi::sqlite3_next_stmt(db, stmt);
            }
            // Another process using the database: SQLite answers busy at once and nothing
            // changes.
            ffi::sqlite3_busy_timeout(db, 0);
            let rc = ffi::sqlite3_exec(
                db,
                c"PRAGMA journal_mode = DELETE".as_ptr(),
                None,
                ptr::null_mut(),
                ptr::null_mut(),
            );
            held.closed = rc == ffi::SQLITE_OK;
            Some(held)
        }
    }
}

/// The connection's mutex, held: nothing else can call on the connection meanwhile.
pub(super) struct Held {
    mutex: *mut ffi::sqlite3_mutex,
    /// Whether the database was checkpointed and WAL mode left.
    pub closed: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: this thread entered the mutex in `Handle::close`, and the connection is open.
        unsafe { ffi::sqlite3_mutex_leave(self.mutex) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use rusqlite::Connection;

    /// `close` from another thread, as the watchdog calls it; the answer's mutex is left there.
    fn close_elsewhere(store: &Store) -> Option<bool> {
        // SAFETY: the store outlives the thread.
        let handle = unsafe { Handle::new(store.conn.handle()) };
        std::thread::spawn(move || handle.close().map(|held| held.closed))
            .join()
            .unwrap()
    }

    #[test]
    fn the_watchdog_closes_an_idle_store_and_leaves_an_open_transaction_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crush.db");
        let wal = dir.path().join("crush.db-wal");
        let store = Store::open(&path).unwrap();
        store
            .conn
            .execute_batch(
                "CREATE TABLE t(x); INSERT INTO t VALUES (1); BEGIN; INSERT INTO t VALUES (2);",
            )
            .unwrap();
        assert_eq!(
            close_elsewhere(&store),
            Some(false),
            "a transaction is open"
        );
        assert!(wal.exists());
        store.conn.execute_batch("COMMIT").unwrap();
        assert_eq!(close_elsewhere(&store), Some(true));
        for f in ["crush.db-wal", "crush.db-shm"] {
            assert!(!dir.path().join(f).exists(), "{f} left");
        }
        drop(store);
        let c = Connection::open(&path).unwrap();
        let n: i64 = c
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2, "every commit is in the database");
    }

    #[test]
    fn a_connection_not_in_serialized_mode_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crush.db");
        drop(Store::open(&path).unwrap());
        // Opened without SQLite's own mutex: another thread must not touch it.
        let read = Store::open_read_only(&path).unwrap();
        assert_eq!(close_elsewhere(&read), None);
    }
}
