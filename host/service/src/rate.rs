//! Fixed-window rate limits per key, in this process: the project API (per user or
//! address), the login throttle, the agent API (per key) and channels' `rpmLimit` (per
//! channel, counting messages) all count here.

use std::collections::HashMap;
use std::sync::Mutex;

/// Keys a rate limiter tracks at most in one window: each costs about 100 bytes, so the map
/// stays under ~10 MB however many addresses an attacker uses. Past it, new keys of the
/// current window go untracked (see `RateLimiter::count`); keys of past windows are dropped
/// at the first count of a new window.
pub const RATE_KEYS_MAX: usize = 100_000;

/// A fixed window per key, so "100 per minute" means exactly that.
/// The counters live in this process: with several replicas each one counts on its own.
pub struct RateLimiter {
    window_secs: i64,
    windows: Mutex<HashMap<String, (i64, u32)>>,
    /// The window of the last sweep (keys of older windows are gone).
    swept: Mutex<i64>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        RateLimiter::new(60)
    }
}

impl RateLimiter {
    pub fn new(window_secs: i64) -> RateLimiter {
        RateLimiter {
            window_secs,
            windows: Mutex::new(HashMap::new()),
            swept: Mutex::new(i64::MIN),
        }
    }

    /// Counts a request; returns (allowed, remaining, seconds until the window resets).
    pub fn hit(&self, key: &str, limit: u32, now_secs: i64) -> (bool, u32, i64) {
        self.count(key, limit, now_secs, 1)
    }

    /// Counts `n` requests at once (a webhook call carrying `n` messages), all or none:
    /// when they do not all fit in what is left of the window, nothing is counted.
    pub fn hit_n(&self, key: &str, limit: u32, n: u32, now_secs: i64) -> (bool, u32, i64) {
        self.count(key, limit, now_secs, n.max(1))
    }

    /// Takes back one counted request of `key` (in its current window).
    pub fn refund(&self, key: &str) {
        if let Some((_, n)) = self.windows.lock().unwrap().get_mut(key) {
            *n = n.saturating_sub(1);
        }
    }

    /// Whether `key` is over `limit` now, without counting anything.
    pub fn over(&self, key: &str, limit: u32, now_secs: i64) -> bool {
        !self.count(key, limit, now_secs, 0).0
    }

    /// Counts `add` requests of `key` (0: only looks).
    fn count(&self, key: &str, limit: u32, now_secs: i64, add: u32) -> (bool, u32, i64) {
        let window = now_secs / self.window_secs;
        let reset = self.window_secs - now_secs % self.window_secs;
        let mut map = self.windows.lock().unwrap();
        {
            // The first count of each window drops the keys of past windows: the state kept
            // is one window's keys, however many keys came and went before.
            let mut swept = self.swept.lock().unwrap();
            if *swept < window {
                *swept = window;
                map.retain(|_, (w, _)| *w == window);
            }
        }
        if map.len() >= RATE_KEYS_MAX && !map.contains_key(key) {
            // Still full of this window's keys: a new key is let through untracked rather
            // than pooled with others (a pool would let an attacker with many addresses lock
            // everyone else out). Memory stays bounded either way.
            return (true, limit, reset);
        }
        if add == 0 {
            return match map.get(key) {
                Some((w, n)) if *w == window && *n >= limit => (false, 0, reset),
                _ => (true, 0, reset),
            };
        }
        let e = map.entry(key.to_owned()).or_insert((window, 0));
        if e.0 != window {
            *e = (window, 0);
        }
        if e.1.saturating_add(add) > limit {
            return (false, limit.saturating_sub(e.1), reset);
        }
        e.1 += add;
        (true, limit - e.1, reset)
    }

    /// The keys counted in the current windows (bounded: see the type's doc).
    pub fn keys(&self) -> usize {
        self.windows.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::RateLimiter;

    #[test]
    fn n_requests_are_counted_all_or_none() {
        let l = RateLimiter::new(60);
        assert_eq!(l.hit_n("ch", 5, 3, 0), (true, 2, 60));
        // Three more do not fit: none is counted.
        assert_eq!(l.hit_n("ch", 5, 3, 1), (false, 2, 59));
        assert_eq!(l.hit_n("ch", 5, 2, 2), (true, 0, 58));
        assert!(!l.hit("ch", 5, 3).0);
        // A new window starts from zero.
        assert_eq!(l.hit_n("ch", 5, 5, 60), (true, 0, 60));
    }

    #[test]
    fn keys_of_past_windows_are_dropped_when_a_new_window_starts() {
        let l = RateLimiter::new(60);
        for i in 0..1000 {
            l.hit(&format!("addr-{i}"), 10, 5);
        }
        assert_eq!(l.keys(), 1000);
        // Looking (a count of 0) in the next window sweeps too.
        assert!(!l.over("addr-1", 10, 61));
        assert_eq!(l.keys(), 0);
        l.hit("addr-1", 10, 62);
        assert_eq!(l.keys(), 1);
    }
}
