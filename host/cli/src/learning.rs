//! `botbox misunderstood` and `botbox replay`: what an environment's users said that the bot
//! fell back on, and what a revision would have answered to their recorded conversations.

use super::{Ctx, enc, find_env, listing, project, time_text, to_json};
use crate::commands::{MisunderstoodArgs, ReplayArgs};
use anyhow::{Result, anyhow, bail};
use botbox_api_types::{MisunderstoodItem, PageOf, Project, Replay, ReplayResult};
use serde_json::{Value as Json, json};
use std::time::{Duration, Instant};

/// How long `replay` waits for the server's answer at most.
const REPLAY_WAIT: Duration = Duration::from_secs(600);

/// `botbox misunderstood`: an environment's inbox (of one status, or all), most frequent
/// first.
pub fn misunderstood(ctx: &Ctx, a: MisunderstoodArgs) -> Result<()> {
    let (env, status) = (a.env.as_str(), a.status.as_deref());
    let p = project::of_folder(ctx, &a.dir)?;
    let e = find_env(ctx, &p.id, env)?
        .ok_or_else(|| anyhow!("project {} has no environment {env}", project::describe(&p)))?;
    let mut path = format!(
        "/projects/{}/environments/{}/misunderstood?limit={}",
        enc(&p.id),
        enc(&e.id),
        a.limit.clamp(1, 100)
    );
    if let Some(s) = status {
        path += &format!("&status={}", enc(s));
    }
    let page: PageOf<MisunderstoodItem> = ctx.call_as("GET", &path, None)?;
    let lines = page.data.iter().map(item_line).collect();
    let text = format!(
        "misunderstood in environment {} of project {} ({} of {} groups{})\n{}",
        e.name,
        project::describe(&p),
        page.data.len(),
        page.total,
        status.map(|s| format!(", {s}")).unwrap_or_default(),
        listing(lines, "Nothing: every message was understood.")
    );
    ctx.out(text, to_json(&page));
    Ok(())
}

fn item_line(i: &MisunderstoodItem) -> String {
    let fell_to = match (&i.intent, &i.flow) {
        (Some(intent), Some(flow)) => format!("{flow}.{intent}"),
        (None, Some(flow)) => format!("{flow}, no intent"),
        _ => "no intent".into(),
    };
    let label = match (&i.status[..], &i.label) {
        ("labelled", Some(l)) => format!("labelled {l}"),
        (s, _) => s.to_owned(),
    };
    format!(
        "{:>6}×  {:<40}  {fell_to:<24} {label:<16} last {}  (id {}, e.g. user {})",
        i.count,
        cut(&i.text, 40),
        time_text(i.last_seen),
        i.id,
        i.sample_user_id
    )
}

/// `botbox replay`: replays the environment's latest conversations on a revision and
/// prints the counts and each first difference; fails when any conversation differs or
/// failed.
pub fn replay(ctx: &Ctx, a: ReplayArgs) -> Result<()> {
    let (p, revision) = match a.revision {
        Some(r) => (project::of_folder(ctx, &a.dir)?, r),
        None => {
            let (p, pushed, text) = super::push_revision(ctx, &a.dir)?;
            eprintln!("{text}");
            (p, pushed.revision)
        }
    };
    let r = run_replay(ctx, &p, &a.env, &revision, a.last)?;
    ctx.out(replay_text(&p, &r), to_json(&r));
    gate(&r)
}

/// Starts a replay of `env`'s latest `last` conversations on `revision` and waits for it.
pub fn run_replay(ctx: &Ctx, p: &Project, env: &str, revision: &str, last: u32) -> Result<Replay> {
    let pid = enc(&p.id);
    let started: Replay = ctx.call_as(
        "POST",
        &format!("/projects/{pid}/replays"),
        Some(&json!({"environment": env, "botRevision": revision, "last": last.clamp(1, 1000)})),
    )?;
    if !ctx.json {
        eprintln!(
            "replaying environment {}'s conversations on revision {revision} …",
            started.environment_name
        );
    }
    let begun = Instant::now();
    let mut r = started;
    while r.status == "running" {
        if begun.elapsed() > REPLAY_WAIT {
            bail!(
                "replay {} is still running after {} s; read it later with GET /projects/{pid}/replays/{}",
                r.id,
                REPLAY_WAIT.as_secs(),
                r.id
            );
        }
        std::thread::sleep(Duration::from_millis(300));
        r = ctx.call_as(
            "GET",
            &format!("/projects/{pid}/replays/{}", enc(&r.id)),
            None,
        )?;
    }
    Ok(r)
}

/// An error when the replay failed, or any conversation differs or failed.
pub fn gate(r: &Replay) -> Result<()> {
    if r.status == "failed" {
        bail!(
            "the replay failed: {}",
            r.error.as_deref().unwrap_or("no reason given")
        );
    }
    if r.differing + r.failed > 0 {
        bail!(
            "{} of {} conversations differ and {} failed on revision {}",
            r.differing,
            r.conversations,
            r.failed,
            r.bot_revision
        );
    }
    Ok(())
}

/// The counts, then each conversation that differs or failed with its first difference
/// side by side.
pub fn replay_text(p: &Project, r: &Replay) -> String {
    let mut lines = vec![format!(
        "replay of {} conversations of environment {} (project {}) on revision {}: {} identical, {} differing, {} failed",
        r.conversations,
        r.environment_name,
        project::describe(p),
        r.bot_revision,
        r.identical,
        r.differing,
        r.failed
    )];
    for c in r.results.iter().filter(|c| c.outcome != "identical") {
        lines.extend(result_lines(c));
    }
    lines.join("\n")
}

const SIDE: usize = 44;

fn result_lines(c: &ReplayResult) -> Vec<String> {
    let head = format!(
        "\nuser {} (channel {}), conversation of {}: {}",
        c.user_id,
        c.channel_id,
        time_text(c.started_at),
        c.outcome
    );
    let mut lines = vec![head];
    if let Some(e) = &c.error {
        lines.push(format!("  {e}"));
    }
    let Some(d) = &c.first_difference else {
        return lines;
    };
    lines.push(format!("  message {}: {}", d.message, shown(&d.input)));
    if let Some(call) = &d.unrecorded_call {
        lines.push(format!(
            "  the revision made a call that was not recorded: {call}"
        ));
    }
    lines.push(format!("  {:<SIDE$} | {}", "before", "after"));
    let n = d.before.len().max(d.after.len());
    for i in 0..n {
        let side = |v: &[Json]| v.get(i).map(shown).unwrap_or_default();
        lines.push(format!(
            "  {:<SIDE$} | {}",
            cut(&side(&d.before), SIDE),
            cut(&side(&d.after), SIDE)
        ));
    }
    lines
}

/// A message or reply as one line: its text, else its type and payload.
fn shown(v: &Json) -> String {
    match v.get("content").and_then(Json::as_str) {
        Some(t) => format!("{t:?}"),
        None => format!(
            "[{}] {}",
            v.get("type").and_then(Json::as_str).unwrap_or("?"),
            v.get("payload").map(Json::to_string).unwrap_or_default()
        ),
    }
}

/// At most `n` characters of `s`, `…` marking a cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(n - 1).collect();
    t.push('…');
    t
}
