//! The guest compiled once per engine configuration and cached on disk: Cranelift takes
//! seconds for the boa guest, loading the artifact milliseconds.

use anyhow::{Context, Result};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
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
    if path.exists() {
        // SAFETY: the name carries the compatibility hash of this engine and the hash of the
        // guest bytes embedded in this binary; only `precompile_component` below writes it.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => return Ok(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cached guest unusable; recompiling")
            }
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
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &bytes)?;
    std::fs::rename(&tmp, &path)?;
    // SAFETY: produced just above by this engine.
    Ok(unsafe { Component::deserialize(engine, &bytes) }?)
}
