//! Analytics benchmark: `cargo build --release -p botbox-bench && target/release/analytics-bench`.
//!
//! Fills a fresh database (SQLite in a temporary folder, PostgreSQL with DATABASE_URL) with
//! one environment's transcript: ANALYTICS_LINES lines (default 10,000,000) over the 30 days
//! up to now, 1,000 users, half in and half out, five intents and two flows, plus 10,000 bot
//! errors; rolls them up as the server's pruner passes do (`Db::roll_up`, timed); then times
//! the analytics query (`Db::analytics`, what `GET /projects/{id}/analytics` runs) over the
//! 30 days by day, the last 3 days by hour and the last day by hour, 5 times each, and
//! prints the median and the slowest. With ANALYTICS_RAW=1 it also times them before the
//! rollup, when every line is scanned.

use botbox_store::Db;
use std::time::{Duration, Instant};

const DAY: i64 = 24 * 3_600_000;
/// Rows per INSERT statement.
const ROWS: i64 = 500;
/// Every transcript line's message.
const MESSAGE: &str = r#"{"type":"text","content":"hello there"}"#;

/// Connects to DATABASE_URL (PostgreSQL, emptied of the bench's rows) or to SQLite in `dir`.
async fn connect(dir: &std::path::Path) -> anyhow::Result<(Db, String)> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| botbox_store::sqlite_url(dir));
    let db = Db::connect(&url).await?;
    if url.starts_with("postgres") {
        for t in ["transcripts", "bot_errors", "rollups", "environments"] {
            sqlx::query(&format!("DELETE FROM {t} WHERE project_id = 'bench'"))
                .execute(&db.pool)
                .await?;
        }
        sqlx::query("DELETE FROM rollup_progress")
            .execute(&db.pool)
            .await?;
    }
    sqlx::query(
        "INSERT INTO environments (id, project_id, name, slug, deployment_version, created_at) \
         VALUES ('env', 'bench', 'production', 'production', '0.0.1', 0)",
    )
    .execute(&db.pool)
    .await?;
    Ok((db, url))
}

/// Inserts `lines` transcript lines, one every `step` ms from `start`.
async fn fill_transcripts(db: &Db, lines: i64, start: i64, step: i64) -> anyhow::Result<()> {
    let intents = ["greeting", "order", "status", "fallback", "bye"];
    let mut i = 0;
    while i < lines {
        let n = ROWS.min(lines - i);
        let mut sql = String::from(
            "INSERT INTO transcripts (id, project_id, environment_id, environment_name, channel_id, \
             user_id, direction, message, flow, intent, state, created_at, step_us) VALUES ",
        );
        for k in 0..n {
            let j = i + k;
            if k > 0 {
                sql.push(',');
            }
            let dir = if j % 2 == 0 { "in" } else { "out" };
            let intent = if j % 2 == 0 {
                format!("'{}'", intents[(j / 2 % 5) as usize])
            } else {
                "NULL".into()
            };
            let flow = if j % 3 == 0 { "order" } else { "main" };
            // Step times spread from 10 us to 50 ms on the users' lines.
            let step_us = if j % 2 == 0 {
                (10 + (j * 7_919) % 50_000).to_string()
            } else {
                "NULL".into()
            };
            sql.push_str(&format!(
                "('b{j:09}', 'bench', 'env', 'production', 'c', 'u{}', '{dir}', \
                 '{MESSAGE}', '{flow}', {intent}, 's', {}, {step_us})",
                j % 1000,
                start + j * step
            ));
        }
        sqlx::query(&sql).execute(&db.pool).await?;
        i += n;
    }
    Ok(())
}

/// Inserts 10,000 bot errors spread over the 30 days from `start`.
async fn fill_errors(db: &Db, start: i64) -> anyhow::Result<()> {
    for e in 0..10_000i64 {
        if e % 500 == 0 {
            let mut sql = String::from(
                "INSERT INTO bot_errors (id, project_id, environment_id, channel_id, created_at, \
                 error_group, error_code, message) VALUES ",
            );
            for k in 0..500 {
                if k > 0 {
                    sql.push(',');
                }
                let at = start + (e + k) * (30 * DAY / 10_000);
                sql.push_str(&format!(
                    "('e{:06}', 'bench', 'env', 'c', {at}, 'bot', 'api-error', 'api action x: failed')",
                    e + k
                ));
            }
            sqlx::query(&sql).execute(&db.pool).await?;
        }
    }
    Ok(())
}

/// Times the analytics query over each range, 5 times each; prints the median and the slowest.
async fn time_queries(db: &Db, start: i64, now: i64) -> anyhow::Result<()> {
    for (what, from, bucket) in [
        ("30 days by day", start, DAY),
        ("3 days by hour", now - 3 * DAY, 3_600_000),
        ("1 day by hour", now - DAY, 3_600_000),
    ] {
        let mut took: Vec<Duration> = Vec::new();
        let mut buckets = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let a = db
                .analytics("bench", ("production", "env"), from, now + 1, bucket, false)
                .await?;
            took.push(t.elapsed());
            buckets = a.buckets.len();
        }
        took.sort();
        println!(
            "  {what:<16} {buckets:>3} buckets   median {:>7.1} ms   slowest {:>7.1} ms",
            took[2].as_secs_f64() * 1e3,
            took[4].as_secs_f64() * 1e3
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let lines = botbox_bench::env_num("ANALYTICS_LINES", 10_000_000) as i64;
    let dir = tempfile::tempdir()?;
    let (db, url) = connect(dir.path()).await?;
    let now = botbox_store::now_ms();
    let start = now - 30 * DAY;
    let step = (30 * DAY / lines).max(1);
    let filled = Instant::now();
    fill_transcripts(&db, lines, start, step).await?;
    fill_errors(&db, start).await?;
    println!(
        "analytics of one environment, {} lines over 30 days, 10,000 errors ({}; filled in {:.0} s)",
        lines,
        if url.starts_with("postgres") {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        filled.elapsed().as_secs_f64()
    );
    if std::env::var_os("ANALYTICS_RAW").is_some() {
        println!("before the rollup (every line scanned):");
        time_queries(&db, start, now).await?;
    }
    let rolled = Instant::now();
    let watermark = db.roll_up(now, Duration::MAX).await?;
    println!(
        "rolled up in {:.1} s (to {} min before now); from the rollups:",
        rolled.elapsed().as_secs_f64(),
        (now - watermark) / 60_000
    );
    time_queries(&db, start, now).await
}
