-- Due deliveries are found key by key (host/src/db/due.rs): a skip scan over the keys with
-- pending rows, then each key's first due rows, one index seek each, so that one channel's
-- or endpoint's backlog does not make every poll walk it.
CREATE INDEX outbox_due_channel ON outbox (status, channel_id, next_at, created_at);
CREATE INDEX webhook_messages_due_endpoint ON webhook_messages (status, endpoint_id, next_at, id);
