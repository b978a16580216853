//! Delivery of replies: rows of the outbox are POSTed to the provider; failures are retried
//! with exponential backoff, so a crash or a provider outage loses nothing.

use super::Live;
use crate::db::{OutboxRow, now_ms};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Rows of one step, for one conversation: delivered in order.
pub(super) type Batch = (String, Vec<OutboxRow>);

/// Deliveries in flight at once, as shards: one conversation always lands on the same shard,
/// so its replies go out in the order the bot gave them.
const SHARDS: usize = 32;

/// Successful first deliveries recorded in one statement at most.
const SENT_BATCH: usize = 256;

pub(super) async fn run(live: Arc<Live>, mut direct: mpsc::UnboundedReceiver<Batch>) {
    // Successes of the direct path are recorded in batches: one UPDATE for many rows.
    let (sent_tx, mut sent_rx) = mpsc::unbounded_channel::<String>();
    {
        let live = live.clone();
        tokio::spawn(async move {
            let mut ids = Vec::with_capacity(SENT_BATCH);
            while sent_rx.recv_many(&mut ids, SENT_BATCH).await > 0 {
                if let Err(e) = live.db.outbox_sent(&ids).await {
                    // The rows stay pending: the worker sends them again after their lease.
                    tracing::error!(error = %format!("{e:#}"), "outbox: recording deliveries");
                }
                ids.clear();
            }
        });
    }
    let mut shards = Vec::with_capacity(SHARDS);
    for _ in 0..SHARDS {
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<OutboxRow>>();
        let live = live.clone();
        let sent_tx = sent_tx.clone();
        tokio::spawn(async move {
            while let Some(rows) = rx.recv().await {
                for row in rows {
                    // While the lease set at commit still covers a whole attempt, no worker
                    // can have taken the row: it is this process's alone. Past that, it is
                    // claimed like the worker does, so that it never goes out twice.
                    let timeout = live.cfg.delivery_timeout.as_millis() as i64;
                    let ours = now_ms() + timeout < row.next_at;
                    let out = if ours {
                        send(&live, &row, Some(&sent_tx)).await
                    } else {
                        match live.db.claim_outbox(&row, timeout * 2).await {
                            Ok(true) => send(&live, &row, None).await,
                            Ok(false) => Ok(()),
                            Err(e) => Err(e.into()),
                        }
                    };
                    if let Err(e) = out {
                        tracing::error!(error = %format!("{e:#}"), "outbox");
                    }
                }
            }
        });
        shards.push(tx);
    }
    let mut poll = tokio::time::interval(live.cfg.poll_interval);
    loop {
        tokio::select! {
            Some((key, rows)) = direct.recv() => {
                use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
                let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(&key) as usize;
                let _ = shards[h % SHARDS].send(rows);
            }
            _ = poll.tick() => {
                if let Err(e) = deliver_due(&live).await {
                    tracing::error!(error = %format!("{e:#}"), "outbox");
                }
            }
        }
    }
}

/// Sends what is due (retries, and rows a crashed process left); returns how many.
pub async fn deliver_due(live: &Live) -> anyhow::Result<usize> {
    let mut handled = 0;
    loop {
        let rows = live.db.due_outbox(now_ms(), 32).await?;
        if rows.is_empty() {
            return Ok(handled);
        }
        for row in rows {
            // The lease keeps other replicas off while this one sends.
            let lease = live.cfg.delivery_timeout.as_millis() as i64 * 2;
            if !live.db.claim_outbox(&row, lease).await? {
                continue;
            }
            handled += 1;
            send(live, &row, None).await?;
        }
    }
}

/// One attempt at one delivery, recorded: sent, retry later, or failed for good. A success
/// goes to `sent` when given (recorded in a batch), else is recorded at once.
async fn send(
    live: &Live,
    row: &OutboxRow,
    sent: Option<&mpsc::UnboundedSender<String>>,
) -> anyhow::Result<()> {
    let headers: Vec<(String, String)> = serde_json::from_str(&row.headers).unwrap_or_default();
    let mut rb = live.http.post(&row.url).body(row.body.clone());
    for (k, v) in headers {
        rb = rb.header(k, v);
    }
    let attempts = row.attempts + 1;
    let allowed = if live.cfg.sandbox.limits.allow_private_network {
        Ok(())
    } else {
        match reqwest::Url::parse(&row.url) {
            Ok(u) => crate::sandbox::effects::check_egress(&u).await,
            Err(e) => Err(format!("invalid url {}: {e}", row.url)),
        }
    };
    let outcome = match allowed {
        Err(e) => Err(e),
        Ok(()) => match rb.send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!("{} answered {}", row.url, r.status())),
            Err(e) => Err(format!("{}: {e}", row.url)),
        },
    };
    match outcome {
        Ok(()) => match sent.map(|tx| tx.send(row.id.clone())) {
            Some(Ok(())) => {}
            _ => {
                live.db
                    .outbox_attempt(&row.id, "sent", attempts, now_ms(), None)
                    .await?
            }
        },
        Err(e) if attempts >= live.cfg.outbox_max_attempts => {
            tracing::error!(outbox = %row.id, channel = %row.channel_id, error = %e, "delivery failed for good");
            live.db
                .outbox_attempt(&row.id, "failed", attempts, now_ms(), Some(&e))
                .await?;
        }
        Err(e) => {
            let delay = backoff(live.cfg.outbox_backoff, attempts);
            tracing::warn!(outbox = %row.id, channel = %row.channel_id, error = %e, retry_in_ms = delay.as_millis() as u64, "delivery failed; will retry");
            live.db
                .outbox_attempt(
                    &row.id,
                    "pending",
                    attempts,
                    now_ms() + delay.as_millis() as i64,
                    Some(&e),
                )
                .await?;
        }
    }
    Ok(())
}

/// `base · 2^(attempts-1)`, at most 10 minutes.
pub fn backoff(base: Duration, attempts: i64) -> Duration {
    let factor = 1u32 << (attempts - 1).clamp(0, 20) as u32;
    (base * factor).min(Duration::from_secs(600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_millis(100);
        assert_eq!(backoff(b, 1), Duration::from_millis(100));
        assert_eq!(backoff(b, 3), Duration::from_millis(400));
        assert_eq!(backoff(b, 40), Duration::from_secs(600));
    }
}
