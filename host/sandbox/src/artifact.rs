//! The guest compiled once per engine configuration and cached on disk: Cranelift takes
//! seconds for the boa guest, loading the artifact milliseconds.
//!
//! The artifact is native code that wasmtime maps and runs without further checks, so a file
//! someone else could write would be a way into the server. It is therefore kept in a private
//! folder (created 0700; a folder or file that another user owns, or that group or others may
//! write, is refused), written 0600 under a temporary name and renamed, with its SHA-256
//! recorded beside it (`.sha256`). Loading reads the file into memory, checks the digest on
//! those very bytes and deserialises them (no window between the check and the use). A
//! missing, unreadable, foreign or mismatching artifact is compiled again, never loaded.

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Loads the precompiled guest for this engine, compiling and storing it when missing.
///
/// The file name is keyed by the engine's compatibility hash and the guest's hash, so only an
/// artifact this binary produced for these settings is ever deserialised.
pub fn load(engine: &Engine, wasm: &[u8], dir: &Path) -> Result<Component> {
    let mut h = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    wasm.hash(&mut h);
    let path = dir.join(format!("guest-{:016x}.cwasm", h.finish()));
    make_private_dir(dir)?;
    match read_verified(&path) {
        Ok(Some(bytes)) => {
            // SAFETY: the bytes are those this binary wrote for this engine and guest (their
            // digest matches the one recorded beside them, in a folder only we can write).
            match unsafe { Component::deserialize(engine, &bytes) } {
                Ok(c) => return Ok(c),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cached guest unusable; recompiling")
                }
            }
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %format!("{e:#}"), "cached guest refused; recompiling")
        }
    }
    let started = std::time::Instant::now();
    let bytes = engine
        .precompile_component(wasm)
        .map_err(anyhow::Error::from)
        .context("compiling the guest")?;
    tracing::info!(
        ms = started.elapsed().as_millis() as u64,
        "compiled the sandbox guest"
    );
    write_private(
        &digest_path(&path),
        hex::encode(Sha256::digest(&bytes)).as_bytes(),
    )?;
    write_private(&path, &bytes)?;
    // SAFETY: produced just above by this engine.
    Ok(unsafe { Component::deserialize(engine, &bytes) }?)
}

fn digest_path(path: &Path) -> PathBuf {
    path.with_extension("cwasm.sha256")
}

/// The artifact's bytes if it exists, is ours and private, and matches its recorded digest;
/// `None` when there is none yet.
fn read_verified(path: &Path) -> Result<Option<Vec<u8>>> {
    if !path.exists() {
        return Ok(None);
    }
    check_private(path)?;
    let digest_file = digest_path(path);
    check_private(&digest_file)?;
    let want = std::fs::read_to_string(&digest_file)
        .with_context(|| format!("reading {}", digest_file.display()))?;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let got = hex::encode(Sha256::digest(&bytes));
    // A digest is not a secret: a plain comparison.
    if got != want.trim() {
        bail!("its SHA-256 {got} is not the recorded {}", want.trim());
    }
    Ok(Some(bytes))
}

/// Creates `dir` (0700) if missing, and refuses one that is not private to this user.
fn make_private_dir(dir: &Path) -> Result<()> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    if !std::fs::metadata(dir)?.is_dir() {
        // Found before compiling: the artifact could never be stored there.
        bail!("{} is not a folder", dir.display());
    }
    check_private(dir)
}

/// Fails unless `path` belongs to this process's user and no one else may write it.
fn check_private(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path)
            .with_context(|| format!("reading {}", path.display()))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if m.file_type().is_symlink() {
            bail!("{} is a symbolic link", path.display());
        }
        if m.uid() != me {
            bail!(
                "{} belongs to user {}, not to {me}",
                path.display(),
                m.uid()
            );
        }
        if m.mode() & 0o022 != 0 {
            bail!(
                "{} may be written by group or others (mode {:o})",
                path.display(),
                m.mode() & 0o777
            );
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` with mode 0600, through a temporary file and a rename.
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tampered_artifact_is_refused_and_a_good_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("cache");
        make_private_dir(&d).unwrap();
        let path = d.join("guest-1.cwasm");
        assert!(read_verified(&path).unwrap().is_none());
        write_private(
            &digest_path(&path),
            hex::encode(Sha256::digest(b"code")).as_bytes(),
        )
        .unwrap();
        write_private(&path, b"code").unwrap();
        assert_eq!(read_verified(&path).unwrap().unwrap(), b"code");
        // Same owner and mode, other bytes: the digest no longer matches.
        write_private(&path, b"evil").unwrap();
        let e = format!("{:#}", read_verified(&path).unwrap_err());
        assert!(e.contains("is not the recorded"), "{e}");
        // No digest at all.
        std::fs::remove_file(digest_path(&path)).unwrap();
        assert!(read_verified(&path).is_err());
    }

    #[test]
    fn a_cache_that_is_not_a_folder_is_refused_before_compiling() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cache");
        std::fs::write(&file, b"x").unwrap();
        let e = format!("{:#}", make_private_dir(&file).unwrap_err());
        assert!(e.contains("is not a folder"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_folder_or_file_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("cache");
        make_private_dir(&d).unwrap();
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let path = d.join("guest-1.cwasm");
        write_private(
            &digest_path(&path),
            hex::encode(Sha256::digest(b"code")).as_bytes(),
        )
        .unwrap();
        write_private(&path, b"code").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = format!("{:#}", read_verified(&path).unwrap_err());
        assert!(e.contains("may be written by group or others"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = format!("{:#}", make_private_dir(&d).unwrap_err());
        assert!(e.contains("may be written by group or others"), "{e}");
    }
}
