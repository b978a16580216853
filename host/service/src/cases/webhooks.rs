//! Standard Webhooks 1.0.0: signing and verification, the secrets of
//! callback endpoints and inbound hooks, the callback sender with its retry schedule, and
//! the signatures of artifact URLs.
//!
//! **Secrets are never stored.** Every secret is derived from the server key
//! ([`ServerKey`]: `--secret-key`/`BOTBOX_SECRET_KEY`, else `secret.key` in the data
//! folder) as HMAC-SHA256(server key, purpose ‖ id ‖ generation). The database holds the
//! generation only, so a copy of the database alone signs nothing; a rotation bumps the
//! generation (the previous one stays valid for 24 h and callbacks are signed with both).
//! Replicas on one PostgreSQL database must share the server key.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use botbox_egress::{Egress, Outbound, Use};
use botbox_store::{Db, EndpointRow, WebhookAttemptRow, WebhookMessageRow, now_ms};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type HmacSha256 = Hmac<Sha256>;

/// Accepted clock difference of an inbound `webhook-timestamp` (5 minutes).
pub const TOLERANCE_S: i64 = 300;
/// How long a rotated-out secret still signs and verifies.
pub const ROTATION_GRACE_MS: i64 = 24 * 3600 * 1000;

/// The server's secret key, from which every webhook secret and artifact URL signature is
/// derived.
#[derive(Clone)]
pub struct ServerKey([u8; 32]);

impl std::fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerKey(…)")
    }
}

impl ServerKey {
    /// From an explicit value (any string of 32+ characters, hashed), else from
    /// `<data>/secret.key` (32 random bytes, created 0600 on first start).
    pub fn load(explicit: Option<&str>, data_dir: &Path) -> anyhow::Result<ServerKey> {
        if let Some(v) = explicit {
            anyhow::ensure!(
                v.len() >= 32,
                "the secret key (--secret-key / BOTBOX_SECRET_KEY) must have at least 32 characters"
            );
            return Ok(ServerKey(Sha256::digest(v.as_bytes()).into()));
        }
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join("secret.key");
        match std::fs::read(&path) {
            Ok(b) if b.len() == 32 => {
                let mut k = [0u8; 32];
                k.copy_from_slice(&b);
                Ok(ServerKey(k))
            }
            Ok(_) => anyhow::bail!("{} is not a 32-byte key", path.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let k: [u8; 32] = rand::random();
                use std::io::Write;
                let mut opts = std::fs::OpenOptions::new();
                opts.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt;
                    opts.mode(0o600);
                }
                opts.open(&path)?.write_all(&k)?;
                Ok(ServerKey(k))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A key for tests.
    pub fn from_bytes(k: [u8; 32]) -> ServerKey {
        ServerKey(k)
    }

    fn derive(&self, purpose: &str, id: &str, generation: i64) -> [u8; 32] {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("any key length");
        m.update(purpose.as_bytes());
        m.update(&[0]);
        m.update(id.as_bytes());
        m.update(&[0]);
        m.update(&generation.to_be_bytes());
        m.finalize().into_bytes().into()
    }

    /// The signing secret of a callback endpoint or inbound hook at a generation.
    pub fn secret(&self, id: &str, generation: i64) -> Vec<u8> {
        self.derive("webhook-secret", id, generation).to_vec()
    }

    /// The secrets that sign an endpoint's callbacks now (the current generation, and the
    /// previous one during its grace period).
    pub fn endpoint_secrets(&self, e: &EndpointRow, now: i64) -> Vec<Vec<u8>> {
        let mut v = vec![self.secret(&e.id, e.generation)];
        if e.previous_until.is_some_and(|t| t > now) && e.generation > 1 {
            v.push(self.secret(&e.id, e.generation - 1));
        }
        v
    }

    /// An artifact URL's signature over its id and expiry.
    pub fn artifact_signature(&self, artifact: &str, expires: i64) -> String {
        URL_SAFE_NO_PAD.encode(self.derive("artifact-url", artifact, expires))
    }

    /// Whether `signature` is the artifact URL's, in constant time.
    pub fn artifact_signature_ok(&self, artifact: &str, expires: i64, signature: &str) -> bool {
        use subtle::ConstantTimeEq;
        let want = self.artifact_signature(artifact, expires);
        want.as_bytes().ct_eq(signature.as_bytes()).into()
    }
}

/// A secret as shown to its owner: `whsec_` + base64.
pub fn show_secret(secret: &[u8]) -> String {
    format!("whsec_{}", STANDARD.encode(secret))
}

/// A shown secret's bytes (`whsec_` + base64).
pub fn parse_secret(shown: &str) -> Option<Vec<u8>> {
    STANDARD
        .decode(shown.strip_prefix("whsec_").unwrap_or(shown))
        .ok()
}

/// `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
pub fn sign(secret: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut m = HmacSha256::new_from_slice(secret).expect("any key length");
    m.update(msg_id.as_bytes());
    m.update(b".");
    m.update(timestamp.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    format!("v1,{}", STANDARD.encode(m.finalize().into_bytes()))
}

/// Why an inbound call was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// A header is missing or malformed.
    Missing(&'static str),
    /// The timestamp is more than the tolerance in the past ("too old") or future.
    Stale(&'static str),
    /// No listed signature matches.
    BadSignature,
}

/// Verifies a Standard Webhooks call: the headers' id and timestamp, the timestamp
/// within [`TOLERANCE_S`] of `now_s`, and one `v1,` signature matching one of `secrets`
/// (compared in constant time), over the raw body bytes. Returns the `webhook-id`.
pub fn verify<'h>(
    headers: &'h http::HeaderMap,
    body: &[u8],
    secrets: &[Vec<u8>],
    now_s: i64,
) -> Result<&'h str, VerifyError> {
    let get = |n: &'static str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .ok_or(VerifyError::Missing(n))
    };
    let id = get("webhook-id")?;
    let ts_s = get("webhook-timestamp")?;
    let sigs = get("webhook-signature")?;
    if id.contains('.') || id.len() > 256 {
        return Err(VerifyError::Missing("webhook-id"));
    }
    let ts: i64 = ts_s
        .parse()
        .map_err(|_| VerifyError::Missing("webhook-timestamp"))?;
    if ts < now_s - TOLERANCE_S {
        return Err(VerifyError::Stale("too old"));
    }
    if ts > now_s + TOLERANCE_S {
        return Err(VerifyError::Stale("too new"));
    }
    for secret in secrets {
        let mut m = HmacSha256::new_from_slice(secret).expect("any key length");
        m.update(id.as_bytes());
        m.update(b".");
        m.update(ts_s.as_bytes());
        m.update(b".");
        m.update(body);
        for s in sigs.split(' ') {
            let Some(b64) = s.strip_prefix("v1,") else {
                continue;
            };
            if let Ok(raw) = STANDARD.decode(b64)
                && m.clone().verify_slice(&raw).is_ok()
            {
                return Ok(id);
            }
        }
    }
    Err(VerifyError::BadSignature)
}

/// The callback sender's settings.
#[derive(Debug, Clone)]
pub struct CallbackConfig {
    /// Waits after each failed attempt (5 s, 5 min, 30 min, 2 h, 5 h,
    /// 10 h, 14 h, 20 h, 24 h, about three days in all), each with ±10 % jitter; after the
    /// last, the message is failed. `--callback-retry-scale` shrinks them for tests.
    pub schedule: Vec<Duration>,
    /// One attempt's time-out (15 s). A 3xx is a failure (no redirect is followed).
    pub timeout: Duration,
    /// Attempts in flight to one endpoint (2): a hanging endpoint holds only its own.
    pub per_endpoint: usize,
    /// How often due messages are looked for (they are also woken by new events).
    pub poll: Duration,
    /// Longest wait a `Retry-After` on a 429, 502 or 504 may ask for (24 h): it replaces
    /// the schedule's next wait when it is longer. A receiver can only slow its own
    /// messages down, never make another endpoint's wait.
    pub max_retry_after: Duration,
    /// Messages in a row that fail through the whole schedule before the endpoint is
    /// disabled (3). The first such message marks it `failing` (shown on the endpoint, and
    /// logged at warn with the workspace); a delivery clears both.
    pub disable_after_exhausted: i64,
    /// Whether `http:` endpoint URLs are accepted (false: HTTPS only). `--allow-private-egress`
    /// turns it on with the private addresses, for local set-ups and tests.
    pub allow_http: bool,
}

impl Default for CallbackConfig {
    fn default() -> Self {
        let m = 60;
        let h = 3600;
        CallbackConfig {
            schedule: [
                5,
                5 * m,
                30 * m,
                2 * h,
                5 * h,
                10 * h,
                14 * h,
                20 * h,
                24 * h,
            ]
            .into_iter()
            .map(Duration::from_secs)
            .collect(),
            timeout: Duration::from_secs(15),
            per_endpoint: 2,
            poll: Duration::from_millis(500),
            max_retry_after: Duration::from_secs(24 * 3600),
            disable_after_exhausted: 3,
            allow_http: false,
        }
    }
}

impl CallbackConfig {
    /// The schedule divided by `scale` (tests: 1000 turns 5 s into 5 ms); `Retry-After`'s
    /// ceiling too.
    pub fn scaled(mut self, scale: u32) -> Self {
        let scale = scale.max(1);
        for d in &mut self.schedule {
            *d /= scale;
        }
        self.max_retry_after /= scale;
        self
    }

    /// The wait before the next attempt after failed attempt number `attempt` (1-based),
    /// given the answer's status and `Retry-After` seconds, the schedule's wait scaled by
    /// `jitter` (0.9–1.1); None when the schedule is over. A `Retry-After` is never cut
    /// short by the jitter.
    pub fn next_wait(
        &self,
        attempt: i64,
        status: Option<u16>,
        retry_after: Option<u64>,
        jitter: f64,
    ) -> Option<Duration> {
        let wait = self
            .schedule
            .get(usize::try_from(attempt - 1).ok()?)?
            .mul_f64(jitter);
        let asked = match (status, retry_after) {
            (Some(429 | 502 | 504), Some(s)) => Duration::from_secs(s).min(self.max_retry_after),
            _ => Duration::ZERO,
        };
        Some(wait.max(asked))
    }
}

/// The callback sender: due messages are claimed (a conditional update, so one sender per
/// attempt across replicas), signed and posted through the egress policy, and every
/// attempt is recorded.
pub struct Callbacks {
    db: Db,
    egress: Arc<Egress>,
    key: ServerKey,
    cfg: CallbackConfig,
    wake: tokio::sync::Notify,
    lanes: Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>,
    drain: crate::drain::Drain,
}

/// What an attempt's answer means.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// 410 Gone: the endpoint is disabled.
    Gone,
    Retry,
}

pub fn outcome(status: Option<u16>) -> Outcome {
    match status {
        Some(s) if (200..300).contains(&s) => Outcome::Delivered,
        Some(410) => Outcome::Gone,
        _ => Outcome::Retry,
    }
}

impl Callbacks {
    /// Whether plain `http://` endpoints (and private addresses) are allowed: only when
    /// the server allows private egress (tests, a closed network).
    pub fn allow_http(&self) -> bool {
        self.cfg.allow_http
    }

    pub fn new(
        db: Db,
        egress: Arc<Egress>,
        key: ServerKey,
        cfg: CallbackConfig,
        drain: crate::drain::Drain,
    ) -> Arc<Self> {
        Arc::new(Callbacks {
            db,
            drain,
            egress,
            key,
            cfg,
            wake: tokio::sync::Notify::new(),
            lanes: Mutex::new(HashMap::new()),
        })
    }

    /// New events were stored: look now instead of at the next poll.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    pub fn spawn(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            // Sends nothing new once a drain starts: what is due stays stored for the next
            // process (or another replica).
            while !me.drain.draining() {
                if let Err(e) = me.round().await {
                    tracing::warn!(error = %e, "sending callbacks");
                }
                tokio::select! {
                    _ = tokio::time::timeout(me.cfg.poll, me.wake.notified()) => {}
                    _ = me.drain.started() => {}
                }
            }
        });
    }

    async fn round(self: &Arc<Self>) -> botbox_store::DbResult<()> {
        // Endpoints whose lanes are full are left out of the query, and each other endpoint
        // brings at most a lane's worth: a backlog on one cannot crowd out the rest.
        let full: Vec<String> = self
            .lanes
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, s)| s.available_permits() == 0)
            .map(|(id, _)| id.clone())
            .take(500)
            .collect();
        let per = self.cfg.per_endpoint as i64;
        for m in self
            .db
            .due_webhook_messages(now_ms(), per, 64, &full)
            .await?
        {
            let lane = {
                let mut lanes = self.lanes.lock().unwrap();
                if lanes.len() > 10_000 {
                    lanes.retain(|_, s| s.available_permits() < self.cfg.per_endpoint);
                }
                lanes
                    .entry(m.endpoint_id.clone())
                    .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.cfg.per_endpoint)))
                    .clone()
            };
            let Ok(permit) = lane.try_acquire_owned() else {
                continue;
            };
            // Held past the attempt's time-out: no other sender takes it meanwhile.
            let until = now_ms() + self.cfg.timeout.as_millis() as i64 + 30_000;
            if !self
                .db
                .claim_webhook_message(&m.id, m.next_at, until)
                .await?
            {
                continue;
            }
            let me = self.clone();
            let busy = self.drain.busy(crate::drain::Work::Callbacks);
            tokio::spawn(async move {
                let _busy = busy;
                if let Err(e) = me.attempt(&m).await {
                    tracing::warn!(message = %m.id, error = %e, "callback attempt");
                }
                drop(permit);
                // The endpoint's lane is free again: its next due message goes now, not at
                // the next poll (a busy endpoint would otherwise get 2 messages a poll).
                me.wake();
            });
        }
        Ok(())
    }

    /// One attempt at a claimed message: its endpoint checked, the message signed and
    /// posted, and the attempt and what it means for the message and endpoint recorded.
    async fn attempt(&self, m: &WebhookMessageRow) -> botbox_store::DbResult<()> {
        let Some(ep) = self.endpoint_taking(m).await? else {
            return Ok(());
        };
        let now = now_ms();
        let headers = self.signed_headers(&ep, m, now);
        let started = Instant::now();
        let r = self.post(&ep, m, &headers).await;
        let (status, error, retry_after) = match &r {
            Ok(a) => (Some(a.status), None, a.retry_after),
            Err(e) => (None, Some(e.to_string()), None),
        };
        let a = WebhookAttemptRow {
            message_id: m.id.clone(),
            attempt: m.attempts + 1,
            at: now,
            status_code: status.map(i64::from),
            error,
            duration_ms: started.elapsed().as_millis() as i64,
        };
        self.record_outcome(&ep, &a, status, retry_after, now).await
    }

    /// The message's endpoint if it still takes messages; else the message fails, its last
    /// attempt saying why, and `None`.
    async fn endpoint_taking(
        &self,
        m: &WebhookMessageRow,
    ) -> botbox_store::DbResult<Option<EndpointRow>> {
        // A message that will not be sent: its last attempt says why.
        let not_sent = |why: &str| WebhookAttemptRow {
            message_id: m.id.clone(),
            attempt: m.attempts + 1,
            at: now_ms(),
            status_code: None,
            error: Some(why.into()),
            duration_ms: 0,
        };
        let Some(ep) = self.db.endpoint(&m.endpoint_id).await? else {
            let a = not_sent("the endpoint was deleted");
            self.db.record_webhook_attempt(&a, "failed", 0).await?;
            return Ok(None);
        };
        if ep.enabled == 0 {
            // Disabled while this message waited (a 410 on another attempt in flight, or
            // its owner): nothing is sent to it any more.
            let a = not_sent("the endpoint is disabled");
            self.db.record_webhook_attempt(&a, "failed", 0).await?;
            return Ok(None);
        }
        Ok(Some(ep))
    }

    /// The headers of a message sent at `now`: Standard Webhooks' id, timestamp and
    /// signatures (one per valid secret of the endpoint).
    fn signed_headers(
        &self,
        ep: &EndpointRow,
        m: &WebhookMessageRow,
        now: i64,
    ) -> Vec<(String, String)> {
        let ts = now / 1000;
        let sigs: Vec<String> = self
            .key
            .endpoint_secrets(ep, now)
            .iter()
            .map(|s| sign(s, &m.id, ts, m.body.as_bytes()))
            .collect();
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("webhook-id".to_owned(), m.id.clone()),
            ("webhook-timestamp".to_owned(), ts.to_string()),
            ("webhook-signature".to_owned(), sigs.join(" ")),
            ("user-agent".to_owned(), "botbox-webhooks/1".to_owned()),
        ]
    }

    /// Posts the message to the endpoint through the egress policy.
    async fn post(
        &self,
        ep: &EndpointRow,
        m: &WebhookMessageRow,
        headers: &[(String, String)],
    ) -> Result<botbox_egress::Answer, botbox_egress::EgressError> {
        self.egress
            .call(
                Use::Delivery,
                Outbound {
                    method: "POST",
                    url: &ep.url,
                    headers,
                    body: Some(m.body.clone().into_bytes()),
                },
                self.cfg.timeout,
                4096,
            )
            .await
    }

    /// Records attempt `a` (made at `now`) with what its answer means: delivered, the
    /// endpoint gone (disabled), or a retry on the schedule (the endpoint exhausted once
    /// the schedule is over).
    async fn record_outcome(
        &self,
        ep: &EndpointRow,
        a: &WebhookAttemptRow,
        status: Option<u16>,
        retry_after: Option<u64>,
        now: i64,
    ) -> botbox_store::DbResult<()> {
        match outcome(status) {
            Outcome::Delivered => {
                self.db.record_webhook_attempt(a, "delivered", 0).await?;
                // The endpoint was read for this attempt: only a failing one is written.
                if ep.exhausted > 0 || ep.failing_since.is_some() {
                    self.db.endpoint_delivered(&ep.id).await?;
                }
                Ok(())
            }
            Outcome::Gone => {
                self.db.record_webhook_attempt(a, "failed", 0).await?;
                tracing::warn!(endpoint = %ep.id, "callback endpoint answered 410 Gone: disabled");
                self.db
                    .set_endpoint_enabled(&ep.id, Some("the endpoint answered 410 Gone"))
                    .await
            }
            Outcome::Retry => match self.cfg.next_wait(
                a.attempt,
                status,
                retry_after,
                0.9 + 0.2 * rand::random::<f64>(),
            ) {
                Some(wait) => {
                    let next = now_ms() + wait.as_millis() as i64;
                    self.db.record_webhook_attempt(a, "pending", next).await
                }
                None => {
                    self.db.record_webhook_attempt(a, "failed", 0).await?;
                    let disabled = self
                        .db
                        .endpoint_exhausted(&ep.id, now, self.cfg.disable_after_exhausted)
                        .await?;
                    tracing::warn!(
                        endpoint = %ep.id,
                        tenant = %ep.workspace_id,
                        disabled,
                        "a callback failed through its whole retry schedule: the endpoint is failing"
                    );
                    Ok(())
                }
            },
        }
    }
}

/// The message id and body of a callback event (`{type, timestamp, data}`; thin: ids and
/// status, the receiver fetches the rest).
pub fn event(event_type: &str, data: serde_json::Value) -> botbox_store::Event {
    botbox_store::Event {
        event_type: event_type.to_owned(),
        body: serde_json::json!({
            "type": event_type,
            "timestamp": crate::agent::iso_ms(now_ms()).replace(".000Z", "Z"),
            "data": data,
        }),
    }
}

/// Event types a callback endpoint may subscribe to (`*` for all).
pub const EVENT_TYPES: [&str; 5] = [
    "task.review_requested",
    "task.completed",
    "task.failed",
    "run.completed",
    "run.failed",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A 429, 502 or 504 with `Retry-After` waits at least that long (up to the
    /// ceiling); other answers and a shorter `Retry-After` keep the schedule; the schedule's
    /// end is the end.
    #[test]
    fn retry_after_lengthens_the_schedule_only_when_asked_to_slow_down() {
        let c = CallbackConfig::default();
        let s = Duration::from_secs;
        assert_eq!(c.next_wait(1, Some(500), None, 1.0), Some(s(5)));
        assert_eq!(c.next_wait(1, Some(429), Some(120), 1.0), Some(s(120)));
        assert_eq!(
            c.next_wait(1, Some(429), Some(120), 0.9),
            Some(s(120)),
            "jitter never shortens it"
        );
        assert_eq!(
            c.next_wait(1, Some(500), None, 1.1),
            Some(s(5).mul_f64(1.1))
        );
        assert_eq!(
            c.next_wait(1, Some(502), Some(2), 1.0),
            Some(s(5)),
            "never shorter"
        );
        assert_eq!(
            c.next_wait(1, Some(500), Some(120), 1.0),
            Some(s(5)),
            "only 429/502/504"
        );
        assert_eq!(
            c.next_wait(2, Some(504), Some(10_000_000), 1.0),
            Some(s(24 * 3600)),
            "capped"
        );
        assert_eq!(
            c.next_wait(1, None, None, 1.0),
            Some(s(5)),
            "a time-out is a failure"
        );
        assert_eq!(c.next_wait(9, Some(500), None, 1.0), Some(s(24 * 3600)));
        assert_eq!(
            c.next_wait(10, Some(500), None, 1.0),
            None,
            "ten attempts in all"
        );
        assert_eq!(botbox_egress::retry_after_secs(" 30 "), Some(30));
        assert_eq!(
            botbox_egress::retry_after_secs("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(0)
        );
        let later = httpdate::fmt_http_date(std::time::SystemTime::now() + s(600));
        let got = botbox_egress::retry_after_secs(&later).unwrap();
        assert!((598..=600).contains(&got), "{got}");
        assert_eq!(botbox_egress::retry_after_secs("soon"), None);
    }

    /// The signature test vector of the Standard Webhooks reference library.
    #[test]
    fn the_standard_webhooks_test_vector() {
        let secret = parse_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        let body = br#"{"email":"test@example.com","username":"test_user"}"#;
        let sig = sign(&secret, "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553, body);
        assert_eq!(sig, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
        let mut h = http::HeaderMap::new();
        h.insert(
            "webhook-id",
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk".parse().unwrap(),
        );
        h.insert("webhook-timestamp", "1649367553".parse().unwrap());
        h.insert(
            "webhook-signature",
            format!("v1,bogus= {sig}").parse().unwrap(),
        );
        assert_eq!(
            verify(&h, body, std::slice::from_ref(&secret), 1649367553 + 10),
            Ok("msg_27UH4WbU6Z5A5EzD8u03UvzRbpk")
        );
        assert_eq!(
            verify(&h, body, std::slice::from_ref(&secret), 1649367553 + 301),
            Err(VerifyError::Stale("too old"))
        );
        assert_eq!(
            verify(&h, body, std::slice::from_ref(&secret), 1649367553 - 301),
            Err(VerifyError::Stale("too new"))
        );
        assert_eq!(
            verify(&h, b"{}", std::slice::from_ref(&secret), 1649367553),
            Err(VerifyError::BadSignature)
        );
        assert_eq!(
            verify(&h, body, &[b"other".to_vec()], 1649367553),
            Err(VerifyError::BadSignature)
        );
        h.remove("webhook-id");
        assert_eq!(
            verify(&h, body, &[secret], 1649367553),
            Err(VerifyError::Missing("webhook-id"))
        );
    }

    #[test]
    fn secrets_are_derived_per_id_and_generation() {
        let k = ServerKey::from_bytes([7; 32]);
        assert_ne!(k.secret("ep_a", 1), k.secret("ep_a", 2));
        assert_ne!(k.secret("ep_a", 1), k.secret("ep_b", 1));
        assert_eq!(k.secret("ep_a", 1), k.secret("ep_a", 1));
        assert_eq!(
            parse_secret(&show_secret(&k.secret("x", 1))).unwrap(),
            k.secret("x", 1)
        );
        let other = ServerKey::from_bytes([8; 32]);
        assert_ne!(k.secret("ep_a", 1), other.secret("ep_a", 1));
        let sig = k.artifact_signature("art_1", 100);
        assert!(k.artifact_signature_ok("art_1", 100, &sig));
        assert!(!k.artifact_signature_ok("art_1", 101, &sig));
        assert!(!k.artifact_signature_ok("art_2", 100, &sig));
        assert!(!other.artifact_signature_ok("art_1", 100, &sig));
    }

    #[test]
    fn rotation_signs_with_both_secrets_for_a_day() {
        let k = ServerKey::from_bytes([1; 32]);
        let mut ep = EndpointRow {
            id: "ep_x".into(),
            workspace_id: "w".into(),
            url: "http://x".into(),
            event_types: "[]".into(),
            enabled: 1,
            disabled_reason: None,
            generation: 1,
            previous_until: None,
            created_by: "u".into(),
            created_at: 0,
            exhausted: 0,
            failing_since: None,
        };
        assert_eq!(k.endpoint_secrets(&ep, 10).len(), 1);
        ep.generation = 2;
        ep.previous_until = Some(1000);
        assert_eq!(
            k.endpoint_secrets(&ep, 10),
            vec![k.secret("ep_x", 2), k.secret("ep_x", 1)]
        );
        assert_eq!(k.endpoint_secrets(&ep, 1001), vec![k.secret("ep_x", 2)]);
    }

    #[test]
    fn answers_map_to_outcomes() {
        assert_eq!(outcome(Some(204)), Outcome::Delivered);
        assert_eq!(outcome(Some(410)), Outcome::Gone);
        for s in [Some(301), Some(429), Some(500), Some(502), None] {
            assert_eq!(outcome(s), Outcome::Retry);
        }
        let c = CallbackConfig::default();
        assert_eq!(c.schedule.len(), 9);
        let total: u64 = c.schedule.iter().map(Duration::as_secs).sum();
        assert!(
            (3 * 86_400 - 12 * 3600..3 * 86_400 + 12 * 3600).contains(&total),
            "{total}"
        );
        assert_eq!(c.scaled(1000).schedule[0], Duration::from_millis(5));
    }
}
