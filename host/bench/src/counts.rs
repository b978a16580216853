//! What a process spends, counted rather than timed: CPU time by thread kind, voluntary and
//! involuntary context switches (from `/proc/<pid>/task/*/`), and system calls (perf's
//! `raw_syscalls:sys_enter` tracepoint over the window, when `perf` can attach). Counts
//! drift far less with the machine's mood than throughput does, so old and new builds are
//! compared on them.
//!
//! Threads that exit inside the window take their counts with them (the server's threads
//! are long-lived: runtime workers, step and burn threads, sqlx's workers, pooled blocking
//! threads); a thread born inside it counts from zero.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};

/// One thread's cumulative counters.
#[derive(Clone, Copy, Default)]
struct Thread {
    cpu_ticks: u64,
    voluntary: u64,
    involuntary: u64,
}

/// The kind of a thread from its name: runtime workers, step threads and so on share a
/// prefix and differ by a number.
fn kind(comm: &str) -> String {
    let base = comm.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '#');
    match base {
        "" => "main".into(),
        b => b.to_owned(),
    }
}

/// Every thread of `pid` with its kind and counters.
fn threads(pid: u32) -> BTreeMap<u32, (String, Thread)> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(tid) = t.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let dir = t.path();
        let (Ok(stat), Ok(status)) = (
            std::fs::read_to_string(dir.join("stat")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue;
        };
        let comm = stat
            .split_once('(')
            .and_then(|(_, r)| r.rsplit_once(')'))
            .map(|(c, _)| c.to_owned())
            .unwrap_or_default();
        let counters = Thread {
            cpu_ticks: cpu_ticks(&stat).unwrap_or(0),
            voluntary: status_field(&status, "voluntary_ctxt_switches:").unwrap_or(0),
            involuntary: status_field(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0),
        };
        out.insert(tid, (kind(&comm), counters));
    }
    out
}

/// CPU ticks spent so far by the local PostgreSQL server: every process named `postgres`
/// (the postmaster and its backends; a backend that exited took its ticks with it).
fn postgres_ticks() -> u64 {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .flatten()
        .filter_map(|p| std::fs::read_to_string(p.path().join("stat")).ok())
        .filter(|stat| stat.contains("(postgres)"))
        .filter_map(|stat| cpu_ticks(&stat))
        .sum()
}

/// A measurement window over one process: started by [`Window::open`], read by
/// [`Window::close`].
pub struct Window {
    pid: u32,
    start: BTreeMap<u32, (String, Thread)>,
    perf: Option<Child>,
    /// The local PostgreSQL server's ticks at the start, when the process uses it.
    postgres: Option<u64>,
}

/// What the process spent in a window, divided per message by [`Spent::report`].
pub struct Spent {
    /// CPU seconds by thread kind.
    pub cpu_by_kind: BTreeMap<String, f64>,
    pub voluntary: u64,
    pub involuntary: u64,
    /// System calls, when perf could count them.
    pub syscalls: Option<u64>,
    /// CPU seconds of the local PostgreSQL server's processes, when measured.
    pub postgres_cpu: Option<f64>,
}

impl Window {
    /// Opens a window over `pid`; with `postgres`, over the local PostgreSQL server's
    /// processes too.
    pub fn open(pid: u32, postgres: bool) -> Window {
        let perf = Command::new("perf")
            .args(["stat", "-x,", "-e", "raw_syscalls:sys_enter", "-p"])
            .arg(pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok();
        // perf needs a moment to attach to every thread.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Window {
            pid,
            start: threads(pid),
            perf,
            postgres: postgres.then(postgres_ticks),
        }
    }

    pub fn close(self) -> Spent {
        let end = threads(self.pid);
        let ticks = ticks_per_second();
        let mut spent = Spent {
            cpu_by_kind: BTreeMap::new(),
            voluntary: 0,
            involuntary: 0,
            syscalls: self.perf.and_then(stop_perf),
            postgres_cpu: self
                .postgres
                .map(|was| postgres_ticks().saturating_sub(was) as f64 / ticks),
        };
        for (tid, (kind, now)) in end {
            let was = self.start.get(&tid).map(|(_, t)| *t).unwrap_or_default();
            *spent.cpu_by_kind.entry(kind).or_default() +=
                now.cpu_ticks.saturating_sub(was.cpu_ticks) as f64 / ticks;
            spent.voluntary += now.voluntary.saturating_sub(was.voluntary);
            spent.involuntary += now.involuntary.saturating_sub(was.involuntary);
        }
        spent
    }
}

/// Stops perf with SIGINT and reads its count.
fn stop_perf(perf: Child) -> Option<u64> {
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
    let out = perf.wait_with_output().ok()?;
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .find(|l| l.contains("raw_syscalls:sys_enter"))
        .and_then(|l| l.split(',').next())
        .and_then(|n| n.trim().parse().ok())
}

/// User + system CPU ticks from a `/proc/…/stat` text: its 14th and 15th fields, the 12th
/// and 13th after the command name (which may hold spaces, in parentheses).
pub(crate) fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// The number in a `/proc/…/status` line `name value [kB]`.
pub(crate) fn status_field(status: &str, name: &str) -> Option<u64> {
    let value = status.lines().find_map(|l| l.strip_prefix(name))?;
    value.trim().trim_end_matches("kB").trim().parse().ok()
}

/// The kernel's clock ticks per second, the unit of `/proc`'s CPU times.
pub(crate) fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

impl Spent {
    /// Lines of the report: per message, CPU µs (in all and by thread kind), context
    /// switches, system calls.
    pub fn report(&self, messages: usize) -> Vec<String> {
        let n = messages.max(1) as f64;
        let total: f64 = self.cpu_by_kind.values().sum();
        let mut kinds: Vec<(&String, &f64)> = self.cpu_by_kind.iter().collect();
        kinds.sort_by(|a, b| b.1.total_cmp(a.1));
        let by_kind: Vec<String> = kinds
            .iter()
            .filter(|(_, s)| **s > 0.0)
            .map(|(k, s)| format!("{k} {:.0}", **s / n * 1e6))
            .collect();
        let mut lines = vec![
            format!(
                "  per message {:.0} µs CPU by thread kind: {}",
                total / n * 1e6,
                by_kind.join(", ")
            ),
            format!(
                "  per message {:.2} voluntary + {:.2} involuntary context switches, {}",
                self.voluntary as f64 / n,
                self.involuntary as f64 / n,
                match self.syscalls {
                    Some(s) => format!("{:.1} system calls", s as f64 / n),
                    None => "system calls not counted (no perf)".into(),
                }
            ),
        ];
        if let Some(pg) = self.postgres_cpu {
            lines.push(format!(
                "  per message {:.0} µs CPU of the PostgreSQL server's processes",
                pg / n * 1e6
            ));
        }
        lines
    }
}
