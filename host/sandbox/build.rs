//! Builds the sandbox guest (guest-sdk for wasm32-wasip2) so that `cargo build` and
//! `cargo run` of the host work on a fresh machine. The guest gets its own target directory:
//! the outer cargo holds the lock on ours.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.ancestors().nth(2).unwrap().to_path_buf();
    for p in [
        "guest-sdk/src",
        "guest-sdk/wit",
        "guest-sdk/Cargo.toml",
        "runtime-core/src",
        "runtime-core/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let target_dir = std::env::var("BOTBOX_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target/guest"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "-p",
            "guest-sdk",
            "--lib",
            "--target",
            "wasm32-wasip2",
            "--profile",
            "guest",
            "--target-dir",
        ])
        .arg(&target_dir);
    // Flags meant for the host build must not leak into the guest build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    // rustup installs the targets of rust-toolchain.toml only with a new toolchain: add the
    // wasm target when it is missing, so that the README's two commands work anywhere.
    ensure_wasm_target();
    let status = cmd.status().expect("running cargo to build the guest");
    if !status.success() {
        panic!(
            "building the sandbox guest failed (is the wasm32-wasip2 target installed? `rustup target add wasm32-wasip2`)"
        );
    }
    let wasm = target_dir.join("wasm32-wasip2/guest/guest_sdk.wasm");
    let bytes = std::fs::read(&wasm).unwrap_or_else(|e| panic!("{}: {e}", wasm.display()));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("guest.wasm");
    std::fs::write(&out, &bytes).unwrap();
}

fn ensure_wasm_target() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot
        .map(|s| s.join("lib/rustlib/wasm32-wasip2").exists())
        .unwrap_or(false);
    if !installed {
        println!("cargo:warning=adding the wasm32-wasip2 target (rustup target add wasm32-wasip2)");
        let _ = Command::new("rustup")
            .args(["target", "add", "wasm32-wasip2"])
            .status();
    }
}
