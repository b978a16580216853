//! `botbox backup` and `botbox restore`: the embedded SQLite database and the server key,
//! in one archive.
//!
//! The archive is a tar file holding `botbox.db` (a consistent copy of the live database,
//! [`botbox_store::backup_sqlite`]), `secret.key` (the server key webhook secrets and
//! artifact signatures derive from; without it every shown webhook secret stops verifying)
//! and `BACKUP` (what made it, when). The server keeps serving while a backup is taken.
//! PostgreSQL deployments back up with `pg_dump` instead (docs/operations.md).

use anyhow::{Context, Result};
use std::path::Path;

/// The database file and the key file in a data folder (and in an archive).
const DB_FILE: &str = "botbox.db";
const KEY_FILE: &str = "secret.key";
const ABOUT_FILE: &str = "BACKUP";

/// What a backup holds.
#[derive(Debug)]
pub struct Taken {
    pub db_bytes: u64,
    /// Whether `secret.key` was in the data folder (else the key was given by
    /// `--secret-key`, and the operator keeps it).
    pub key: bool,
}

/// Writes the archive `out` from the data folder `data` (SQLite only). `out` is written
/// whole or not at all (a temporary file renamed at the end).
pub fn backup(data: &Path, database_url: Option<&str>, out: &Path) -> Result<Taken> {
    if database_url.is_some_and(|u| !u.starts_with("sqlite:")) {
        anyhow::bail!(
            "botbox backup copies the embedded SQLite database; for PostgreSQL use pg_dump \
             (see docs/operations.md, \"Backup and restore\") and keep the server key"
        );
    }
    let db = data.join(DB_FILE);
    anyhow::ensure!(
        db.exists(),
        "no database in {} (give the server's --data folder)",
        data.display()
    );
    anyhow::ensure!(!out.exists(), "{} already exists", out.display());
    let work = tempfile::Builder::new()
        .prefix(".botbox-backup")
        .tempdir_in(
            out.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        )
        .context("creating a folder beside the output")?;
    let copy = work.path().join(DB_FILE);
    botbox_store::backup_sqlite(&db, &copy)?;
    let tmp = work.path().join("archive.tar");
    let mut tar = tar::Builder::new(std::fs::File::create(&tmp)?);
    tar.append_path_with_name(&copy, DB_FILE)?;
    let key = data.join(KEY_FILE);
    let has_key = key.exists();
    if has_key {
        tar.append_path_with_name(&key, KEY_FILE)?;
    }
    let about = format!(
        "botbox {} backup\ntaken at {} (Unix ms)\nfiles: {DB_FILE}{}\n",
        env!("CARGO_PKG_VERSION"),
        botbox_store::now_ms(),
        if has_key { ", secret.key" } else { "" }
    );
    let mut header = tar::Header::new_gnu();
    header.set_size(about.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, ABOUT_FILE, about.as_bytes())?;
    tar.into_inner()?.sync_all()?;
    std::fs::rename(&tmp, out).with_context(|| format!("writing {}", out.display()))?;
    Ok(Taken {
        db_bytes: std::fs::metadata(&copy)?.len(),
        key: has_key,
    })
}

/// Unpacks the archive `file` into the data folder `data`, which must hold no database.
pub fn restore(file: &Path, data: &Path) -> Result<()> {
    anyhow::ensure!(
        !data.join(DB_FILE).exists(),
        "{} already holds a database: restore into an empty folder (or move it away first)",
        data.display()
    );
    std::fs::create_dir_all(data).with_context(|| format!("creating {}", data.display()))?;
    let mut archive = tar::Archive::new(
        std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?,
    );
    let mut found_db = false;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry.path()?.to_string_lossy().into_owned();
        // Only the files a backup writes, by name: nothing else lands in the folder.
        let target = match name.as_str() {
            DB_FILE => {
                found_db = true;
                data.join(DB_FILE)
            }
            KEY_FILE => data.join(KEY_FILE),
            ABOUT_FILE => continue,
            other => anyhow::bail!("{}: unexpected entry {other:?}", file.display()),
        };
        let mut out = std::fs::File::create(&target)?;
        std::io::copy(&mut entry, &mut out)?;
        out.sync_all()?;
        if name == KEY_FILE {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    anyhow::ensure!(
        found_db,
        "{} holds no {DB_FILE}: not a botbox backup",
        file.display()
    );
    Ok(())
}
