//! The listing of suspected duplicate intents (docs/api.md, "ListDuplicateIntents"): the intent
//! guard's index entries that hold more than one key, each key with its record's status now.

use super::{Engine, EngineError};
use oncekey_ledger::{self as ledger, IntentMatch, ListFilter, RecordId, Status};
use oncekey_store::Store;

/// Arguments claimed under more than one key within their window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateIntent {
    /// The namespace the keys were claimed in.
    pub namespace: String,
    /// The arguments' fingerprint.
    pub fingerprint: [u8; 32],
    /// Every key claimed with it, oldest first, refused ones too.
    pub claims: Vec<IntentMatch>,
}

/// A page of `Engine::duplicate_intents`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DuplicatePage {
    /// The suspected duplicates of the page (a page may hold fewer than asked, or none).
    pub intents: Vec<DuplicateIntent>,
    /// Where the next page starts (the store's listing position); `None` at the end.
    pub next: Option<Vec<u8>>,
}

impl<S: Store> Engine<S> {
    /// A page of `tenant`'s suspected duplicate intents (of `namespace` only, when given),
    /// after `after` (the previous page's `next`), reading at most `limit` index entries.
    pub async fn duplicate_intents(
        &self,
        tenant: &str,
        namespace: Option<&str>,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<DuplicatePage, EngineError> {
        let filter = ListFilter::new(
            Some(ledger::INTENT_NAMESPACE.to_owned()),
            vec![Status::Succeeded],
            None,
        );
        let page = self.list(tenant, &filter, after, limit).await?;
        let now = self.core.clock.now();
        let mut intents = Vec::new();
        for listed in &page.records {
            let Some((ns, fingerprint)) = ledger::intent_entry_of(listed) else {
                continue;
            };
            if namespace.is_some_and(|want| want != ns) {
                continue;
            }
            // A listing may leave out the result body, which holds the keys: read it whole.
            let Some(entry) = self.core.get(&listed.id).await? else {
                continue;
            };
            let keys = ledger::intent_keys(&entry);
            if keys.len() < 2 {
                continue;
            }
            let mut claims = Vec::with_capacity(keys.len());
            for k in keys {
                let status = match k.refused {
                    true => None,
                    false => {
                        let id = RecordId::new(tenant, ns, k.key.clone());
                        self.core
                            .get(&id)
                            .await?
                            .filter(|r| !r.status.is_tombstone())
                            .map(|r| r.reported_status(now))
                    }
                };
                claims.push(IntentMatch {
                    key: k.key,
                    status,
                    at: k.at,
                    refused: k.refused,
                });
            }
            intents.push(DuplicateIntent {
                namespace: ns.to_owned(),
                fingerprint,
                claims,
            });
        }
        Ok(DuplicatePage {
            intents,
            next: page.next,
        })
    }
}
