//! The receive pipeline: one webhook call, from the provider's bytes to stored outcomes.
//!
//! verify → parse → (fetch the text, for Webex) → cap and rate-limit → for each message:
//! dedupe → run → commit (session, transcript, outbox rows and the provider's message id in
//! one transaction) → deliver (the outbox). It runs in a task of its own, detached from the
//! HTTP connection: a provider that gives up waiting does not cancel a step halfway, and its
//! retry of the same message id waits for that step under the session's lock, then finds
//! the id stored and answers 200 without running it again. A crash before the commit leaves
//! nothing stored, so the retry runs the message; a crash after it leaves the id, so the
//! retry does not. The HTTP handler (`botbox_api`) only maps a [`Receipt`] to a response.
//!
//! Messages without a provider id (generic posts without `messages[].id`) cannot be told
//! apart from new ones: a retry of such a message runs again.

use super::{Handled, Live, LiveError};
use botbox_channels::{self as channels, ChannelError, Inbound};
use botbox_lanes::Lane;
use std::sync::Arc;
use tracing::Instrument as _;

/// Messages one webhook request may carry (generic's `messages`, LINE's `events`, ...). A
/// provider sends one or a few; each runs a step, so the cap bounds what one request costs.
pub const MAX_MESSAGES_PER_REQUEST: usize = 100;

/// What became of one webhook call.
#[derive(Debug)]
pub enum Receipt {
    /// Every message ran, or had run before: the provider may forget them.
    Done { ran: usize, duplicates: usize },
    /// A provider handshake: answer with this body, run nothing.
    Handshake {
        content_type: &'static str,
        body: String,
    },
    /// No such channel, or nothing deployed for it.
    NotFound(String),
    /// Not signed with the channel's secret: nothing was counted or run.
    BadSignature(String),
    /// Unreadable, or too many messages in one request.
    BadPayload(String),
    /// The channel's `rpmLimit` (messages per minute) is used up.
    RateLimited(u32),
    /// The tenant has too many messages waiting; the provider should retry.
    Busy(String),
    /// Something on our side failed; the messages not marked seen run on the retry.
    Failed(anyhow::Error),
}

impl Live {
    /// Where a webhook call for `channel_id` runs, and the channel's route if it is known:
    /// a known channel's tenant over its share on the background runtime, and so does the
    /// connection that brings the call, from here to its answer (see `Live::over_share`,
    /// `botbox_lanes::go_to`); an unknown channel's first call on the main one. Call it before
    /// taking the call's body: taking it, whatever hyper has not read yet (a body longer
    /// than what came with the headers), the rest of the handler and the answer then run
    /// on that lane. What came with the headers was read where the connection was.
    pub async fn arrival(&self, channel_id: &str) -> (Option<super::Route>, Lane) {
        let cached = self.cached_route(channel_id);
        let lane = cached
            .as_ref()
            .map_or(Lane::Main, |route| self.lane(&route.owner));
        botbox_lanes::go_to(cached.as_ref().map(|r| r.owner.as_str()), lane).await;
        (cached, lane)
    }

    /// Runs [`Live::receive`] in a task of its own on `lane` (from [`Live::arrival`], with
    /// the route it gave) and waits for its receipt: dropping the returned future (the
    /// client went away) leaves the task running to the end.
    pub async fn receive_detached(
        self: &Arc<Self>,
        (cached, lane): (Option<super::Route>, Lane),
        channel_id: String,
        query: Option<String>,
        headers: http::HeaderMap,
        body: bytes::Bytes,
    ) -> Receipt {
        let live = self.clone();
        let span = tracing::info_span!("receive", channel = %channel_id);
        let task = self.runtime(lane).spawn(
            async move {
                live.receive(cached, &channel_id, query.as_deref(), &headers, &body)
                    .await
            }
            .instrument(span),
        );
        task.await
            .unwrap_or_else(|e| Receipt::Failed(anyhow::anyhow!("receive task: {e}")))
    }

    /// The whole receive pipeline for one webhook call (see the module's comment), on the
    /// channel's route if the caller already has it (`cached`), else read here.
    pub async fn receive(
        &self,
        cached: Option<super::Route>,
        channel_id: &str,
        query: Option<&str>,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> Receipt {
        let found = match cached {
            Some(r) => Ok(Some(r)),
            None => self.route(channel_id).await,
        };
        let route = match found {
            Ok(Some(r)) => r,
            Ok(None) => return Receipt::NotFound(format!("channel {channel_id}")),
            Err(LiveError::NotDeployed(m)) => return Receipt::NotFound(m),
            Err(e) => return Receipt::Failed(anyhow::anyhow!("{e}")),
        };
        let info = route.info();
        let call = channels::Call {
            headers,
            query,
            body,
        };
        let items = match channels::parse(&info, &call) {
            Err(ChannelError::Signature(m)) => {
                tracing::warn!(channel = %channel_id, reason = %m, "webhook rejected: bad signature");
                return Receipt::BadSignature(m);
            }
            Err(ChannelError::Payload(m)) => return Receipt::BadPayload(m),
            Ok(Inbound::Handshake { content_type, body }) => {
                return Receipt::Handshake { content_type, body };
            }
            Ok(Inbound::Messages(items)) => items,
            Ok(Inbound::FetchText { mut item, fetch }) => match self.fetch_text(&fetch).await {
                Ok(text) => {
                    item.message.content = Some(text);
                    vec![item]
                }
                Err(e) => {
                    tracing::warn!(channel = %channel_id, error = %e, "could not read the message's text from the provider");
                    return Receipt::Failed(anyhow::anyhow!(
                        "reading the message from the provider: {e}"
                    ));
                }
            },
        };
        // Charged only now that the request is authentic, and per message: unsigned requests
        // cannot use up a channel's budget, and one request cannot carry a flood.
        if items.len() > MAX_MESSAGES_PER_REQUEST {
            return Receipt::BadPayload(format!(
                "{} messages in one request; at most {MAX_MESSAGES_PER_REQUEST}",
                items.len()
            ));
        }
        if !self.channel_rpm_ok(&route.channel, items.len()) {
            return Receipt::RateLimited(route.channel.rpm_limit.unwrap_or(0) as u32);
        }
        let (mut ran, mut duplicates) = (0, 0);
        for item in items {
            match self.handle(&route, item).await {
                Ok(Handled::Ran) => ran += 1,
                Ok(Handled::Duplicate) => duplicates += 1,
                // The user got the bot's defaultErrorMessage (if any) and the failure is
                // stored: the provider must not retry a message that will fail the same way.
                Err(LiveError::Step(_)) => ran += 1,
                Err(LiveError::NotDeployed(m)) => return Receipt::NotFound(m),
                Err(LiveError::Busy(m)) => return Receipt::Busy(m),
                Err(LiveError::Internal(e)) => return Receipt::Failed(e),
            }
        }
        Receipt::Done { ran, duplicates }
    }
}
