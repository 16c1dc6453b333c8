//! `Sealer`: the running key ring, shared by every request and replaced when the key ring file
//! is reloaded. Reads are cheap (clone an `Arc` under a read lock held for no longer); a
//! replacement that would change the `hmac` key is refused, since every hashed key would become
//! unreachable. Loading the file and deciding when to reload are the service's work.

use crate::keyring::KeyRing;
use std::sync::{Arc, RwLock};

/// A cheap-clone handle to the current key ring.
#[derive(Clone)]
pub struct Sealer {
    ring: Arc<RwLock<Arc<KeyRing>>>,
}

impl Sealer {
    /// A handle on `ring`.
    pub fn new(ring: KeyRing) -> Sealer {
        Sealer {
            ring: Arc::new(RwLock::new(Arc::new(ring))),
        }
    }

    /// The current ring: an operation uses one ring from start to end.
    pub fn ring(&self) -> Arc<KeyRing> {
        // A panic elsewhere cannot leave the ring half-replaced: it is one pointer swap.
        self.ring.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes `ring` the current ring, unless the current ring has an `hmac` key and the new one
    /// changes or drops it (then the current ring stays and the error says why, naming no
    /// secret). Adding an `hmac` key where there was none is allowed: key privacy cannot have
    /// been on without one (`serve` refuses to start so).
    pub fn replace(&self, ring: KeyRing) -> Result<(), String> {
        let mut current = self.ring.write().unwrap_or_else(|e| e.into_inner());
        if current.hmac_id().is_some() && !current.same_hmac(&ring) {
            let name = |id: Option<&str>| match id {
                Some(id) => format!("key {id:?}"),
                None => "none".to_owned(),
            };
            return Err(format!(
                "the new key ring changes the hmac key (running: {}, new: {}, or the same id \
                 with another secret): that would make every hashed key unreachable, so the \
                 running key ring is kept",
                name(current.hmac_id()),
                name(ring.hmac_id())
            ));
        }
        *current = Arc::new(ring);
        Ok(())
    }

    /// `privacy::hash_key` with the current ring.
    pub fn hash_key(&self, tenant: &str, namespace: &str, key: &str) -> Option<String> {
        crate::privacy::hash_key(&self.ring(), tenant, namespace, key)
    }
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Sealer").field(&self.ring()).finish()
    }
}
