//! A token bucket: it fills at `rate` tokens a second up to `size`, and each admitted request takes
//! one. Pure arithmetic on the instants it is given (no clock of its own), so it is tested without
//! sleeping.

use std::time::{Duration, Instant};

/// One tenant's bucket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    /// A full bucket of `size` tokens.
    pub(crate) fn full(size: f64, now: Instant) -> Self {
        Self {
            tokens: size,
            updated: now,
        }
    }

    /// The tokens at `now` (never more than `size`, which may have shrunk since the last call).
    fn level(&self, now: Instant, rate: f64, size: f64) -> f64 {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        (self.tokens + elapsed * rate).min(size)
    }

    /// Takes one token, or says how long until one is there.
    pub(crate) fn take(&mut self, now: Instant, rate: f64, size: f64) -> Result<(), Duration> {
        self.tokens = self.level(now, rate, size);
        self.updated = self.updated.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / rate))
        }
    }

    /// Whether the bucket is full at `now`: then it is no different from a new one and may be
    /// forgotten.
    pub(crate) fn is_full(&self, now: Instant, rate: f64, size: f64) -> bool {
        self.level(now, rate, size) >= size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_full_bucket_admits_its_size_then_refuses_until_a_token_grows_back() {
        let t0 = Instant::now();
        let mut b = Bucket::full(3.0, t0);
        for _ in 0..3 {
            assert_eq!(b.take(t0, 10.0, 3.0), Ok(()));
        }
        // 10 tokens a second: the next one is 100 ms away.
        let wait = b.take(t0, 10.0, 3.0).unwrap_err();
        assert!(wait > ms(99) && wait <= ms(100), "{wait:?}");
        // Half way there, half the wait is left.
        let wait = b.take(t0 + ms(50), 10.0, 3.0).unwrap_err();
        assert!(wait > ms(49) && wait <= ms(50), "{wait:?}");
        assert_eq!(b.take(t0 + ms(100), 10.0, 3.0), Ok(()));
        assert!(b.take(t0 + ms(100), 10.0, 3.0).is_err());
    }

    #[test]
    fn refusals_take_nothing_and_idle_time_refills_only_up_to_the_size() {
        let t0 = Instant::now();
        let mut b = Bucket::full(2.0, t0);
        b.take(t0, 1.0, 2.0).unwrap();
        b.take(t0, 1.0, 2.0).unwrap();
        for _ in 0..100 {
            assert!(b.take(t0 + ms(500), 1.0, 2.0).is_err());
        }
        // The refused requests did not dig a hole: one second after emptying, one token.
        assert_eq!(b.take(t0 + ms(1000), 1.0, 2.0), Ok(()));
        // An hour idle fills it to its size, not to 3600.
        let later = t0 + Duration::from_secs(3600);
        assert!(b.is_full(later, 1.0, 2.0));
        assert_eq!(b.take(later, 1.0, 2.0), Ok(()));
        assert_eq!(b.take(later, 1.0, 2.0), Ok(()));
        assert!(b.take(later, 1.0, 2.0).is_err());
    }

    #[test]
    fn a_smaller_size_from_a_reload_caps_the_tokens_at_once() {
        let t0 = Instant::now();
        let mut b = Bucket::full(100.0, t0);
        assert_eq!(b.take(t0, 100.0, 1.0), Ok(()));
        assert!(b.take(t0, 100.0, 1.0).is_err());
        assert!(!b.is_full(t0, 100.0, 1.0));
        assert!(b.is_full(t0 + ms(10), 100.0, 1.0));
    }

    #[test]
    fn an_instant_before_the_last_update_counts_as_no_time() {
        let t0 = Instant::now();
        let mut b = Bucket::full(1.0, t0 + ms(10));
        b.take(t0 + ms(10), 1.0, 1.0).unwrap();
        // Requests race for the lock, so `now` may be a little older than `updated`.
        assert!(b.take(t0, 1.0, 1.0).is_err());
        assert_eq!(b.take(t0 + ms(1010), 1.0, 1.0), Ok(()));
    }
}
