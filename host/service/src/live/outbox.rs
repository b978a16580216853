//! Delivery of replies: rows of the outbox are POSTed to the provider; failures are retried
//! with exponential backoff, so a crash or a provider outage loses nothing.
//!
//! Fairness: deliveries are scheduled per channel. Each channel has its own cap of
//! deliveries in flight ([`CHANNEL_CONCURRENCY`]), each tenant one over all its channels
//! ([`TENANT_CONCURRENCY`]), and each poll takes a few due rows per channel, so an endpoint
//! that accepts connections and never answers delays only its own channel's replies (and a
//! tenant's many such endpoints only its own).

use super::Live;
use botbox_egress::{Outbound, Use};
use botbox_store::{OutboxRow, now_ms};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};

/// Rows of one step, for one conversation: delivered in order.
///
/// Deliveries run on the main runtime whoever's they are: they share the egress client's
/// connection pools, and a pooled connection is driven by the runtime that opened it, so a
/// connection opened in the background would serve other tenants' deliveries from there.
pub(super) type Batch = (String, Vec<OutboxRow>);

/// Deliveries in flight at once to one channel's endpoint (4). A channel whose endpoint
/// hangs holds at most this many deliveries, each until the delivery time-out; every other
/// channel goes on at its own pace. One conversation's replies still go out in order.
pub const CHANNEL_CONCURRENCY: usize = 4;

/// Deliveries in flight at once for all the channels of one tenant (16): a tenant with many
/// channels whose endpoints hang holds at most this many connections, not 4 per channel.
pub const TENANT_CONCURRENCY: usize = 16;

/// Due rows taken per channel per poll (8): a channel with a backlog cannot fill the poll
/// with its own rows and hold back the retries of the others.
const DUE_PER_CHANNEL: i64 = 8;

/// Lease time a row must still have, beyond the delivery time-out, to be sent without a claim.
const OWN_LEASE_MARGIN_MS: i64 = 3_000;

/// Successful first deliveries handed to the database in one call at most.
const SENT_BATCH: usize = 256;

/// Rows one channel may have queued in memory on the direct path (256). Past it, a step's
/// new rows are left to the poller: they are stored, and due once their lease (twice the
/// delivery time-out) runs out. Without it, a tenant whose endpoint accepts connections and
/// never answers, sending all the while, piled up its replies in this process's memory
/// without bound (its channel delivers 4 per time-out). Cost: past the cap, a channel's
/// replies wait for their lease before the first attempt, and may overtake, or be overtaken
/// by, replies still queued (as retries already can).
pub const DIRECT_ROWS_PER_CHANNEL: usize = 256;

/// How long an idle conversation lane lives before its task ends.
const LANE_IDLE: Duration = Duration::from_secs(30);

/// The delivery lanes: one task per conversation with replies in flight (its replies in
/// order), and a semaphore per channel that caps the deliveries in flight to its endpoint.
#[derive(Default)]
struct Lanes {
    conversations: Mutex<HashMap<String, mpsc::UnboundedSender<Queued>>>,
    /// Per channel: its rows queued on the direct path ([`DIRECT_ROWS_PER_CHANNEL`]).
    direct_rows: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    channels: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Per tenant (a project's owner): its deliveries in flight.
    tenants: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Rows the poller handed to a task that has not finished with them, with their channel.
    in_flight: Mutex<HashMap<String, String>>,
}

/// A delivered row's id on its way to being recorded as sent: a drain waits for the record
/// (else the next process would send the row again).
type Sent = (String, crate::drain::Busy);

/// A step's rows on the direct path, counted against their channel's cap until dropped.
type Queued = (Vec<OutboxRow>, Held);

struct Held {
    count: Arc<AtomicUsize>,
    rows: usize,
    _busy: crate::drain::Busy,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.count.fetch_sub(self.rows, Ordering::AcqRel);
    }
}

impl Lanes {
    /// Counts `rows` rows against `channel`'s direct-path cap; `None` past it.
    fn hold(&self, drain: &crate::drain::Drain, channel: &str, rows: usize) -> Option<Held> {
        let count = super::keyed(&self.direct_rows, channel, || AtomicUsize::new(0));
        let held = Held {
            count,
            rows,
            _busy: drain.busy(crate::drain::Work::Deliveries),
        };
        let before = held.count.fetch_add(rows, Ordering::AcqRel);
        // Dropping `held` gives the rows back.
        (before + rows <= DIRECT_ROWS_PER_CHANNEL).then_some(held)
    }
}

/// One delivery's place: in its tenant's and in its channel's caps.
struct Turn {
    _tenant: tokio::sync::OwnedSemaphorePermit,
    _channel: tokio::sync::OwnedSemaphorePermit,
}

impl Lanes {
    /// Waits for a place to deliver to `channel_id`: first in the channel's cap, then in its
    /// tenant's (in that order, so deliveries queued behind one hanging channel hold none of
    /// the tenant's places, and the tenant's other channels go on). The tenant comes from
    /// the route cache (a deleted channel counts as its own tenant).
    async fn turn(&self, live: &Live, channel_id: &str) -> Option<Turn> {
        let tenant = match live.route(channel_id).await {
            Ok(Some(r)) => r.owner,
            _ => format!("channel:{channel_id}"),
        };
        let c = super::keyed(&self.channels, channel_id, || {
            Semaphore::new(CHANNEL_CONCURRENCY)
        });
        let t = super::keyed(&self.tenants, &tenant, || {
            Semaphore::new(TENANT_CONCURRENCY)
        });
        let channel = c.acquire_owned().await.ok()?;
        Some(Turn {
            _tenant: t.acquire_owned().await.ok()?,
            _channel: channel,
        })
    }
}

pub(super) async fn run(live: Arc<Live>, mut direct: mpsc::UnboundedReceiver<Batch>) {
    // Successes of the direct path are recorded in batches: one UPDATE for many rows.
    let (sent_tx, mut sent_rx) = mpsc::unbounded_channel::<Sent>();
    {
        let live = live.clone();
        tokio::spawn(async move {
            let mut sent = Vec::with_capacity(SENT_BATCH);
            while sent_rx.recv_many(&mut sent, SENT_BATCH).await > 0 {
                // The batch's drain tokens are dropped once it is written (or not).
                let ids = sent.drain(..).map(|(id, _busy)| id).collect();
                if let Err(e) = live.db.outbox_sent_soon(ids).await {
                    // The rows stay pending: the worker sends them again after their lease.
                    tracing::error!(error = %format!("{e:#}"), "outbox: recording deliveries");
                }
            }
        });
    }
    let lanes = Arc::new(Lanes::default());
    let mut poll = tokio::time::interval(live.cfg.poll_interval);
    loop {
        // Once a drain starts the poller takes no new rows; replies of steps still finishing
        // come on the direct path and are sent.
        let polling = !live.drain.draining();
        tokio::select! {
            Some((key, rows)) = direct.recv() => {
                direct_send(&live, &lanes, &sent_tx, key, rows);
            }
            _ = live.drain.started(), if polling => {}
            _ = poll.tick(), if polling => {
                if let Err(e) = poll_due(&live, &lanes).await {
                    tracing::error!(error = %format!("{e:#}"), "outbox");
                }
            }
        }
    }
}

/// Hands a step's rows to its conversation's lane, starting the lane if it has none.
fn direct_send(
    live: &Arc<Live>,
    lanes: &Arc<Lanes>,
    sent_tx: &mpsc::UnboundedSender<Sent>,
    key: String,
    rows: Vec<OutboxRow>,
) {
    // Past the channel's cap: left to the poller.
    let Some(held) = rows
        .first()
        .and_then(|r| lanes.hold(&live.drain, &r.channel_id, rows.len()))
    else {
        return;
    };
    let mut map = lanes.conversations.lock().unwrap();
    let rows = match map.get(&key) {
        Some(tx) => match tx.send((rows, held)) {
            Ok(()) => return,
            // The lane ended in between: start another.
            Err(e) => e.0,
        },
        None => (rows, held),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(rows);
    map.insert(key.clone(), tx.clone());
    tokio::spawn(conversation_lane(
        live.clone(),
        lanes.clone(),
        sent_tx.clone(),
        key,
        tx,
        rx,
    ));
}

/// Delivers one conversation's replies in order, each under its channel's cap.
async fn conversation_lane(
    live: Arc<Live>,
    lanes: Arc<Lanes>,
    sent_tx: mpsc::UnboundedSender<Sent>,
    key: String,
    me: mpsc::UnboundedSender<Queued>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
) {
    loop {
        let (rows, _held) = match tokio::time::timeout(LANE_IDLE, rx.recv()).await {
            Ok(Some(queued)) => queued,
            _ => {
                // Idle: leave the map (if still ours), then finish what arrived meanwhile.
                {
                    let mut map = lanes.conversations.lock().unwrap();
                    if map.get(&key).is_some_and(|tx| tx.same_channel(&me)) {
                        map.remove(&key);
                    }
                }
                rx.close();
                while let Ok((rows, _held)) = rx.try_recv() {
                    deliver_direct(&live, &lanes, &sent_tx, rows).await;
                }
                return;
            }
        };
        deliver_direct(&live, &lanes, &sent_tx, rows).await;
    }
}

async fn deliver_direct(
    live: &Live,
    lanes: &Lanes,
    sent_tx: &mpsc::UnboundedSender<Sent>,
    rows: Vec<OutboxRow>,
) {
    for row in rows {
        let Some(_turn) = lanes.turn(live, &row.channel_id).await else {
            return;
        };
        // While the lease set at commit still covers a whole attempt, no worker can have
        // taken the row: it is this process's alone. Past that (it waited for its channel),
        // it is claimed like the worker does, so that it never goes out twice.
        let timeout = live.cfg.delivery_timeout.as_millis() as i64;
        // The attempt (egress check, send) and recording its success must end before the
        // lease: a margin covers the name lookup and the batched write.
        let ours = now_ms() + timeout + OWN_LEASE_MARGIN_MS < row.next_at;
        let out = if ours {
            send(live, &row, Some(sent_tx)).await
        } else {
            match live.db.claim_outbox(&row, timeout * 2).await {
                Ok(true) => send(live, &row, None).await,
                Ok(false) => Ok(()),
                Err(e) => Err(e.into()),
            }
        };
        if let Err(e) = out {
            tracing::error!(error = %format!("{e:#}"), "outbox");
        }
    }
}

/// Channels left out of one poll's query at most (see [`poll_due`]).
const EXCLUDED_MAX: usize = 1000;

/// One poll: the due rows (retries, and rows a crashed process left), a few per channel,
/// each sent by its own task under its channel's cap. Returns how many were handed out.
async fn poll_due(live: &Arc<Live>, lanes: &Arc<Lanes>) -> anyhow::Result<usize> {
    // Channels whose rows the poller already handed out are left out of the query: their
    // further rows could not be sent before those finish anyway, and one tenant's hanging
    // channels would otherwise fill the poll's limit with rows that wait, every poll.
    let busy: Vec<String> = {
        let in_flight = lanes.in_flight.lock().unwrap();
        let set: HashSet<&String> = in_flight.values().collect();
        set.into_iter().take(EXCLUDED_MAX).cloned().collect()
    };
    let rows = live
        .db
        .due_outbox(now_ms(), DUE_PER_CHANNEL, 1024, &busy)
        .await?;
    let mut handed = 0;
    for row in rows {
        {
            let mut in_flight = lanes.in_flight.lock().unwrap();
            if in_flight.contains_key(&row.id) {
                continue;
            }
            in_flight.insert(row.id.clone(), row.channel_id.clone());
        }
        handed += 1;
        let live = live.clone();
        let lanes = lanes.clone();
        let busy = live.drain.busy(crate::drain::Work::Deliveries);
        tokio::spawn(async move {
            let _busy = busy;
            if let Some(_turn) = lanes.turn(&live, &row.channel_id).await {
                // Claimed only once it can be sent: the lease then covers the attempt.
                let lease = live.cfg.delivery_timeout.as_millis() as i64 * 2;
                let out = match live.db.claim_outbox(&row, lease).await {
                    Ok(true) => send(&live, &row, None).await,
                    Ok(false) => Ok(()),
                    Err(e) => Err(e.into()),
                };
                if let Err(e) = out {
                    tracing::error!(error = %format!("{e:#}"), "outbox");
                }
            }
            lanes.in_flight.lock().unwrap().remove(&row.id);
        });
    }
    Ok(handed)
}

/// One attempt at one delivery, recorded: sent, retry later, or failed for good. A success
/// goes to `sent` when given (recorded in a batch), else is recorded at once.
async fn send(
    live: &Live,
    row: &OutboxRow,
    sent: Option<&mpsc::UnboundedSender<Sent>>,
) -> anyhow::Result<()> {
    let headers: Vec<(String, String)> = serde_json::from_str(&row.headers).unwrap_or_default();
    let attempts = row.attempts + 1;
    // Through the egress module: its policy, no redirects (a 3xx is a failed attempt), the
    // delivery time-out. Errors name the URL redacted (Telegram's token is in its path,
    // Messenger's in its query): they are logged and stored in `last_error`.
    let req = Outbound {
        method: "POST",
        url: &row.url,
        headers: &headers,
        body: Some(row.body.clone().into_bytes()),
    };
    let outcome = match live
        .egress
        .call(Use::Delivery, req, live.cfg.delivery_timeout, 0)
        .await
    {
        Ok(a) if (200..300).contains(&a.status) => Ok(()),
        Ok(a) => Err(format!("{} answered {}", a.url, a.status)),
        Err(e) => Err(e.to_string()),
    };
    let counted = match &outcome {
        Ok(()) => "sent",
        Err(_) if attempts >= live.cfg.outbox_max_attempts => "failed",
        Err(_) => "retry",
    };
    metrics::counter!("botbox_deliveries_total", "outcome" => counted).increment(1);
    match outcome {
        Ok(()) => match sent.map(|tx| {
            let busy = live.drain.busy(crate::drain::Work::Deliveries);
            tx.send((row.id.clone(), busy))
        }) {
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

    /// A channel holds at most its cap of rows on the direct path; rows given back (their
    /// delivery ended) make room again, and other channels have caps of their own.
    #[test]
    fn the_direct_path_holds_a_bounded_number_of_rows_per_channel() {
        let lanes = Lanes::default();
        let drain = crate::drain::Drain::default();
        let mut held = Vec::new();
        for _ in 0..DIRECT_ROWS_PER_CHANNEL / 2 {
            held.push(lanes.hold(&drain, "hanging", 2).expect("under the cap"));
        }
        assert!(
            lanes.hold(&drain, "hanging", 1).is_none(),
            "one row over the cap is left to the poller"
        );
        assert!(
            lanes
                .hold(&drain, "other", DIRECT_ROWS_PER_CHANNEL)
                .is_some()
        );
        // A refused hold counted nothing: one batch delivered makes room for two rows.
        held.pop();
        held.push(
            lanes
                .hold(&drain, "hanging", 2)
                .expect("room for the two rows given back"),
        );
        assert!(lanes.hold(&drain, "hanging", 1).is_none());
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_millis(100);
        assert_eq!(backoff(b, 1), Duration::from_millis(100));
        assert_eq!(backoff(b, 3), Duration::from_millis(400));
        assert_eq!(backoff(b, 40), Duration::from_secs(600));
    }
}
