//! What the benchmark binaries share: the release `botbox serve` beside them, started on a
//! fresh data folder (included with `#[path]`; not part of the library).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub const PASSWORD: &str = "bench-admin-password";

/// A number from the environment, or `default`.
pub fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A running server; killed on drop.
pub struct BenchServer {
    child: Child,
    pub base: String,
    _data: tempfile::TempDir,
}

impl BenchServer {
    /// Starts `botbox serve` (the binary beside this one) with a huge rate limit, private
    /// egress allowed (sinks are on loopback) and `extra` arguments. SQLite in a temporary
    /// folder unless `DATABASE_URL` is set.
    pub fn start(extra: &[&str]) -> anyhow::Result<BenchServer> {
        let exe = std::env::current_exe()?.with_file_name("botbox");
        let data = tempfile::tempdir()?;
        let mut cmd = Command::new(&exe);
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--rate-limit", "1000000"])
            .arg("--allow-private-egress")
            .args(extra)
            .arg("--data")
            .arg(data.path())
            .env("BOTBOX_ADMIN_PASSWORD", PASSWORD)
            .env("BOTBOX_LOG", "error")
            .stdout(Stdio::piped());
        if std::env::var("DATABASE_URL").is_err() {
            cmd.env_remove("DATABASE_URL");
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", exe.display()))?;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let base = loop {
            let line = lines
                .next()
                .ok_or_else(|| anyhow::anyhow!("server exited"))??;
            if let Some(u) = line.strip_prefix("botbox listening on ") {
                break u.to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Ok(BenchServer {
            child,
            base,
            _data: data,
        })
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
