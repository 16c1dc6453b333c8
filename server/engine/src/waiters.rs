//! In-process wake-ups for what waits on a record to settle: Claims held by `wait`, and
//! KeepAlive streams (which end when their record settles).
//!
//! One channel per record id that something listens on, in a map sharded by the id's hash: a
//! settle wakes the listeners of that id and no other, so one tenant's thousands of held Claims
//! cost another tenant's settles nothing but a map lookup. A listener registers for as long as
//! it lives (`Listener`); the channel goes when its last listener does, so the map holds only
//! ids something waits on. No busy loop, no timer.

use super::sharded::Sharded;
use oncekey_ledger::RecordId;
use std::sync::Arc;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// The channel of one id, and how many listeners hold it.
struct Channel {
    shared: Arc<Shared>,
    listeners: usize,
}

/// What a channel's listeners share: its id (to unregister) and its `Notify`.
struct Shared {
    id: RecordId,
    notify: Notify,
}

/// Wake-up channels by record id.
#[derive(Default)]
pub(crate) struct Waiters {
    channels: Sharded<Channel>,
}

/// One registration on the channel of an id, until dropped.
pub struct Listener<'a> {
    waiters: &'a Waiters,
    shared: Arc<Shared>,
}

impl Waiters {
    /// Registers on `id`'s channel: `Listener::notified` resolves on the next `notify(id)`.
    pub(crate) fn listen(&self, id: &RecordId) -> Listener<'_> {
        let mut shard = self.channels.shard(id);
        let channel = match shard.get_mut(id) {
            Some(channel) => channel,
            None => shard.entry(id.clone()).or_insert_with(|| Channel {
                shared: Arc::new(Shared {
                    id: id.clone(),
                    notify: Notify::new(),
                }),
                listeners: 0,
            }),
        };
        channel.listeners += 1;
        Listener {
            waiters: self,
            shared: channel.shared.clone(),
        }
    }

    /// Wakes everything listening on `id`, and nothing else.
    pub(crate) fn notify(&self, id: &RecordId) {
        let shared = self.channels.shard(id).get(id).map(|c| c.shared.clone());
        if let Some(shared) = shared {
            shared.notify.notify_waiters();
        }
    }

    /// How many ids have a listener now.
    #[cfg(test)]
    pub(crate) fn ids(&self) -> usize {
        self.channels.each().map(|shard| shard.len()).sum()
    }
}

impl Listener<'_> {
    /// Resolves on the next settle of the id. Like `Notify::notified`, it sees only settles after
    /// it was first polled or `enable`d: enable it before looking at the record, so a settle right
    /// after the look is not missed.
    pub fn notified(&self) -> Notified<'_> {
        self.shared.notify.notified()
    }
}

impl Drop for Listener<'_> {
    fn drop(&mut self) {
        let id = &self.shared.id;
        let mut shard = self.waiters.channels.shard(id);
        if let Some(channel) = shard.get_mut(id) {
            channel.listeners -= 1;
            if channel.listeners == 0 {
                shard.remove(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn id(key: usize) -> RecordId {
        RecordId::new("tenant", "ns", format!("k{key}"))
    }

    #[test]
    fn a_settle_wakes_the_listeners_of_its_key_and_no_other() {
        let waiters = Waiters::default();
        let listeners: Vec<_> = (0..1000).map(|k| waiters.listen(&id(k % 500))).collect();
        let mut woken: Vec<_> = listeners
            .iter()
            .map(|l| {
                let mut notified = Box::pin(l.notified());
                notified.as_mut().enable();
                notified
            })
            .collect();
        waiters.notify(&id(7));
        let ready: Vec<usize> = woken
            .iter_mut()
            .enumerate()
            .filter_map(|(i, n)| n.as_mut().now_or_never().map(|()| i))
            .collect();
        // The two listeners on k7 (listeners 7 and 507), not one of the 998 others.
        assert_eq!(ready, vec![7, 507]);
    }

    #[test]
    fn a_channel_lives_as_long_as_its_listeners() {
        let waiters = Waiters::default();
        let (a, b) = (waiters.listen(&id(1)), waiters.listen(&id(1)));
        let c = waiters.listen(&id(2));
        assert_eq!(waiters.ids(), 2);
        drop(a);
        assert_eq!(waiters.ids(), 2, "k1 still has a listener");
        let mut notified = Box::pin(b.notified());
        notified.as_mut().enable();
        waiters.notify(&id(1));
        assert!(notified.now_or_never().is_some());
        drop((b, c));
        assert_eq!(waiters.ids(), 0);
        // A settle nobody listens to costs a lookup and nothing else.
        waiters.notify(&id(1));
        assert_eq!(waiters.ids(), 0);
    }
}
