//! A consistent copy of a live SQLite database, with SQLite's online backup API.
//!
//! The copy is taken in one step of `sqlite3_backup_step(-1)`: one read transaction, so it
//! is the database as of one moment (a commit is wholly in or wholly out). In WAL mode the
//! server's writers go on meanwhile; a checkpoint waits for the read to end. Cost: one pass
//! over the file's pages (the time of a file copy), no lock held against the server.

use anyhow::{Context, Result};
use rusqlite::OpenFlags;
use rusqlite::backup::{Backup, StepResult};
use std::path::Path;
use std::time::Duration;

/// Copies the SQLite database `src` (live or not) into the new file `dst`, then checks the
/// copy's integrity. `dst` must not exist.
pub fn backup_sqlite(src: &Path, dst: &Path) -> Result<()> {
    anyhow::ensure!(src.exists(), "no database at {}", src.display());
    anyhow::ensure!(!dst.exists(), "{} already exists", dst.display());
    let from = rusqlite::Connection::open_with_flags(
        src,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("opening {}", src.display()))?;
    from.busy_timeout(Duration::from_secs(10))?;
    let mut to =
        rusqlite::Connection::open(dst).with_context(|| format!("creating {}", dst.display()))?;
    {
        let backup = Backup::new(&from, &mut to)?;
        loop {
            match backup.step(-1)? {
                StepResult::Done => break,
                // Busy or locked (a writer outside WAL mode holds the file): again shortly.
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    let verdict: String = to.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    anyhow::ensure!(
        verdict == "ok",
        "the copy fails its integrity check: {verdict}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy taken while another connection keeps writing holds a prefix of the writes:
    /// whole transactions only, every row it has exists in the source.
    #[test]
    fn a_copy_under_writes_is_a_consistent_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("live.db");
        let conn = rusqlite::Connection::open(&src).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE t (n INTEGER NOT NULL, pair INTEGER NOT NULL);",
        )
        .unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (src, stop) = (src.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = rusqlite::Connection::open(&src).unwrap();
                let mut n = 0i64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 200 {
                    // Two rows per transaction: a torn copy would hold an odd count.
                    let tx = c.transaction().unwrap();
                    tx.execute("INSERT INTO t VALUES (?1, 0)", [n]).unwrap();
                    tx.execute("INSERT INTO t VALUES (?1, 1)", [n]).unwrap();
                    tx.commit().unwrap();
                    n += 1;
                }
                n
            })
        };
        while conn
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap()
            < 100
        {
            std::thread::yield_now();
        }
        let dst = dir.path().join("copy.db");
        backup_sqlite(&src, &dst).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written = writer.join().unwrap();
        let copy = rusqlite::Connection::open(&dst).unwrap();
        let (rows, max): (i64, i64) = copy
            .query_row("SELECT COUNT(*), MAX(n) FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(rows % 2, 0, "only whole transactions");
        assert_eq!(rows, 2 * (max + 1), "a prefix of the writes, without gaps");
        assert!(
            rows >= 100 && max < written,
            "{rows} rows of {written} writes"
        );
        assert!(
            backup_sqlite(&src, &dst).is_err(),
            "an existing copy is not overwritten"
        );
    }
}
