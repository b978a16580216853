//! Rows due for delivery, a few per key: the outbox's per channel, the callback webhooks'
//! per endpoint. One key's backlog (a hanging endpoint with thousands of retries due) must
//! neither fill a poll nor make it slow.
//!
//! A poll first walks the keys that have pending rows, one index seek per key (a skip scan
//! over the `(status, key, next_at, …)` index, written as a recursive query because
//! neither backend skips by itself), then takes each key's first due rows with one more
//! seek per key. Its cost is O(keys × log rows), whatever one key's backlog. (One window
//! query over every due row would not do: with a hanging channel's 10,000 rows due, each
//! poll would take 20–30 ms of a database connection every 500 ms, while returning nothing,
//! and the other tenants' p99 would double; noisy-bench.)

use super::{Db, DbResult};
use sqlx::any::AnyRow;

/// Keys walked by one poll at most (256). Beyond that, the next poll goes on from the last
/// key walked (the keys are taken in turn, in key order), so every key is reached. The
/// rows query is one `UNION ALL` arm per key: SQLite allows 500 arms at most
/// (`SQLITE_MAX_COMPOUND_SELECT`).
pub(crate) const KEYS_PER_POLL: i64 = 256;

/// A table of rows delivered per key.
pub(crate) struct DueRows {
    pub table: &'static str,
    /// The key column (`channel_id`, `endpoint_id`).
    pub key: &'static str,
    /// The columns returned.
    pub cols: &'static str,
    /// The delivery order within a key and across keys (`next_at, …`, as the index).
    pub order: &'static str,
    /// One more condition on the rows (or `TRUE`).
    pub filter: String,
}

impl Db {
    /// The rows of `t` due at `now`: at most `per_key` per key and `limit` in all, in
    /// `t.order`, leaving out the keys in `except` (those their sender is already busy with).
    pub(crate) async fn due_per_key<R>(
        &self,
        t: &DueRows,
        now: i64,
        per_key: i64,
        limit: i64,
        except: &[String],
    ) -> DbResult<Vec<R>>
    where
        R: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        let after = self.due_cursors.lock().unwrap().get(t.table).cloned();
        let walked = self
            .pending_keys(t, after.as_deref().unwrap_or_default(), KEYS_PER_POLL)
            .await?;
        // Fewer than a full walk: the next poll starts from the first key again.
        let next = match walked.last() {
            Some(last) if walked.len() as i64 == KEYS_PER_POLL => last.clone(),
            _ => String::new(),
        };
        self.due_cursors.lock().unwrap().insert(t.table, next);
        let keys: Vec<&String> = walked.iter().filter(|k| !except.contains(k)).collect();
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let sql = rows_sql(t, keys.len());
        let mut q = sqlx::query_as(&sql).bind(now).bind(per_key).bind(limit);
        for k in keys {
            q = q.bind(k.as_str());
        }
        Ok(q.fetch_all(&self.pool).await?)
    }

    /// Up to `max` keys of `t` with pending rows, after `after`, in order: one index seek
    /// each.
    async fn pending_keys(&self, t: &DueRows, after: &str, max: i64) -> DbResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(&keys_sql(t))
            .bind(after)
            .bind(max)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|r| r.0).collect())
    }
}

/// The keys with pending rows after `$1`, at most `$2`: a skip scan, one seek per key.
fn keys_sql(t: &DueRows) -> String {
    let (table, key) = (t.table, t.key);
    format!(
        "WITH RECURSIVE k(v, n) AS ( \
           SELECT (SELECT MIN({key}) FROM {table} WHERE status = 'pending' AND {key} > $1), 1 \
           UNION ALL \
           SELECT (SELECT MIN({key}) FROM {table} WHERE status = 'pending' AND {key} > k.v), n + 1 \
           FROM k WHERE k.v IS NOT NULL AND n < $2 \
         ) SELECT v FROM k WHERE v IS NOT NULL"
    )
}

/// The first `$2` due rows (`next_at <= $1`) of each of `keys` keys (`$4…`), `$3` in all.
fn rows_sql(t: &DueRows, keys: usize) -> String {
    let (table, key, cols, order, filter) = (t.table, t.key, t.cols, t.order, &t.filter);
    let per: Vec<String> = (0..keys)
        .map(|i| {
            format!(
                "SELECT * FROM (SELECT * FROM {table} WHERE status = 'pending' AND {key} = ${} \
                 AND next_at <= $1 AND {filter} ORDER BY {order} LIMIT $2) d{i}",
                i + 4
            )
        })
        .collect();
    format!(
        "SELECT {cols} FROM ({}) due ORDER BY {order} LIMIT $3",
        per.join(" UNION ALL ")
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::OutboxRow;

    fn outbox() -> DueRows {
        DueRows {
            table: "outbox",
            key: "channel_id",
            cols: "id, channel_id, url, headers, body, status, attempts, next_at, last_error",
            order: "next_at, created_at",
            filter: "TRUE".into(),
        }
    }

    /// A pending outbox row of `channel`, due at `next_at` (and created then).
    pub(crate) async fn insert(db: &Db, id: &str, channel: &str, next_at: i64) {
        sqlx::query(
            "INSERT INTO outbox (id, channel_id, url, headers, body, status, attempts, next_at, created_at) \
             VALUES ($1, $2, 'http://x', '[]', '{}', 'pending', 0, $3, $3)",
        )
        .bind(id)
        .bind(channel)
        .bind(next_at)
        .execute(&db.pool)
        .await
        .unwrap();
    }

    /// More keys than one poll walks: the next poll goes on from where the last stopped,
    /// then starts over, so no key is left out for good.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn polls_take_the_keys_in_turn() {
        let (_dir, db) = crate::test_sqlite().await;
        let n = KEYS_PER_POLL as usize + 40;
        for i in 0..n {
            insert(&db, &format!("r{i:04}"), &format!("c{i:04}"), 1).await;
        }
        // A backlog on one channel: only `per_key` of it per poll.
        for j in 0..50 {
            insert(&db, &format!("b{j:04}"), "c0000", 2).await;
        }
        let poll = || async {
            let rows: Vec<OutboxRow> = db.due_per_key(&outbox(), 10, 3, 10_000, &[]).await.unwrap();
            rows
        };
        let first = poll().await;
        assert_eq!(
            first.len(),
            KEYS_PER_POLL as usize + 2,
            "256 keys, 3 rows of c0000"
        );
        assert_eq!(first.iter().filter(|r| r.channel_id == "c0000").count(), 3);
        let second = poll().await;
        let second_keys: Vec<&str> = second.iter().map(|r| r.channel_id.as_str()).collect();
        assert_eq!(
            second_keys.len(),
            40,
            "the keys the first poll did not reach"
        );
        assert!(second_keys.iter().all(|k| *k >= "c0256"), "{second_keys:?}");
        let third = poll().await;
        assert_eq!(third.len(), first.len(), "then it starts over");
        // Rows come in delivery order across keys.
        assert!(first.windows(2).all(|w| w[0].next_at <= w[1].next_at));
        // Left-out keys are not returned.
        let except = vec!["c0000".to_string()];
        let rows: Vec<OutboxRow> = db
            .due_per_key(&outbox(), 10, 3, 10_000, &except)
            .await
            .unwrap();
        assert!(rows.iter().all(|r| r.channel_id != "c0000"));
    }

    /// The poll's queries seek through the index and never scan the table, so one key's
    /// backlog costs a poll nothing (SQLite's plan; PostgreSQL runs the same SQL in the
    /// end-to-end delivery tests).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn polls_seek_and_do_not_scan() {
        let (_dir, db) = crate::test_sqlite().await;
        for j in 0..200 {
            insert(&db, &format!("b{j:04}"), "c-backlog", j).await;
        }
        sqlx::query("ANALYZE").execute(&db.pool).await.unwrap();
        for sql in [keys_sql(&outbox()), rows_sql(&outbox(), 3)] {
            let plan: Vec<(i64, i64, i64, String)> =
                sqlx::query_as(&format!("EXPLAIN QUERY PLAN {sql}"))
                    .bind(10i64)
                    .bind(3i64)
                    .bind(100i64)
                    .bind("c-backlog")
                    .bind("x")
                    .bind("y")
                    .fetch_all(&db.pool)
                    .await
                    .unwrap();
            let steps: Vec<&str> = plan.iter().map(|p| p.3.as_str()).collect();
            assert!(
                steps.iter().all(|s| !s.starts_with("SCAN outbox")),
                "a full scan of the outbox in {steps:?}"
            );
            assert!(
                steps.iter().any(|s| s.contains("outbox_due_channel")),
                "the per-key index is not used: {steps:?}"
            );
        }
    }
}
