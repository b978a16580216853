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
    let mut tar = tar::Builder::new(owner_only(&tmp)?);
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

/// Creates `path` readable and writable by its owner alone (0600 whatever the umask): an
/// archive holds every tenant's data and the server key.
fn owner_only(path: &Path) -> Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let f = o
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    // A file that existed keeps its mode through open: set it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(f)
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
        let mut out = owner_only(&target)?;
        std::io::copy(&mut entry, &mut out)?;
        out.sync_all()?;
    }
    anyhow::ensure!(
        found_db,
        "{} holds no {DB_FILE}: not a botbox backup",
        file.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// Under the common umask 022 a plain `File::create` makes 0644: the archive (every
    /// tenant's data and the server key) and the restored files must be the owner's alone.
    #[tokio::test]
    async fn archives_and_restored_files_are_the_owners_alone_whatever_the_umask() {
        // SAFETY: umask only changes the mode of files created afterwards; 022 is the
        // usual default, so other tests in this process see nothing unusual.
        unsafe { libc::umask(0o022) };
        let data = tempfile::tempdir().unwrap();
        let db = botbox_store::Db::connect(&botbox_store::sqlite_url(data.path()))
            .await
            .unwrap();
        db.close().await;
        std::fs::write(data.path().join(KEY_FILE), [7u8; 32]).unwrap();
        let out = tempfile::tempdir().unwrap();
        let archive = out.path().join("botbox.backup");
        let taken = backup(data.path(), None, &archive).unwrap();
        assert!(taken.key);
        assert_eq!(mode(&archive), 0o600, "the archive");
        let restored = out.path().join("restored");
        restore(&archive, &restored).unwrap();
        assert_eq!(
            mode(&restored.join(DB_FILE)),
            0o600,
            "the restored database"
        );
        assert_eq!(mode(&restored.join(KEY_FILE)), 0o600, "the restored key");
    }
}
