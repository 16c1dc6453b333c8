//! Counts the requests the gateway is working on, including forwards whose client went away, so
//! that a drain waits for them to settle their keys before the process exits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// Work in flight.
#[derive(Debug, Default, Clone)]
pub struct Tracker {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    active: AtomicUsize,
    idle: Notify,
}

/// One piece of work; done when dropped.
#[derive(Debug)]
pub struct Guard {
    inner: Arc<Inner>,
}

impl Tracker {
    /// Starts one piece of work.
    pub fn enter(&self) -> Guard {
        self.inner.active.fetch_add(1, Ordering::SeqCst);
        Guard {
            inner: self.inner.clone(),
        }
    }

    /// How much work is in flight.
    pub fn active(&self) -> usize {
        self.inner.active.load(Ordering::SeqCst)
    }

    /// Resolves once no work is in flight.
    pub async fn idle(&self) {
        loop {
            let notified = self.inner.idle.notified();
            if self.active() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.inner.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn idle_waits_for_every_guard() {
        let t = Tracker::default();
        let a = t.enter();
        let b = t.enter();
        let waiter = tokio::spawn({
            let t = t.clone();
            async move { t.idle().await }
        });
        drop(a);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        drop(b);
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("idle once both guards are gone")
            .unwrap();
    }
}
