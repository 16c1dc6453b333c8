//! The `Sealed` store's counters: records that could not be opened, by cause
//! (`oncekey_unreadable_records_total{cause}`), and records `reseal` wrote again
//! (`oncekey_records_resealed_total`). Names here are without the `oncekey_` prefix, which the
//! registry the collector is registered in adds (`Store::collector`).

use oncekey_store::Unreadable;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Labels of `oncekey_unreadable_records_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabels {
    /// `missing_key` or `tampered`.
    cause: &'static str,
}

const UNREADABLE: (&str, &str) = (
    "unreadable_records",
    "reads of records whose sealed fields could not be opened: their key is not in the key ring (cause=missing_key) or the ciphertext was altered or moved (cause=tampered)",
);
const RESEALED: (&str, &str) = (
    "records_resealed",
    "records written again under the primary key by rekey",
);

/// The counters (cheap to clone: clones share them).
#[derive(Clone, Debug)]
pub struct SealingMetrics {
    unreadable: Family<CauseLabels, Counter>,
    resealed: Counter,
}

impl Default for SealingMetrics {
    fn default() -> Self {
        let unreadable = Family::<CauseLabels, Counter>::default();
        // Both series exist from the start, at 0, so a rate over them is defined.
        for cause in [Unreadable::MissingKey, Unreadable::Tampered] {
            let _ = unreadable.get_or_create(&CauseLabels {
                cause: cause.as_str(),
            });
        }
        Self {
            unreadable,
            resealed: Counter::default(),
        }
    }
}

impl SealingMetrics {
    /// Counts one read of a record that could not be opened.
    pub fn unreadable(&self, cause: Unreadable) {
        self.unreadable
            .get_or_create(&CauseLabels {
                cause: cause.as_str(),
            })
            .inc();
    }

    /// Counts one record written again under the primary key.
    pub fn resealed(&self) {
        self.resealed.inc();
    }

    /// Unreadable records counted so far with `cause`.
    pub fn unreadable_count(&self, cause: Unreadable) -> u64 {
        self.unreadable
            .get_or_create(&CauseLabels {
                cause: cause.as_str(),
            })
            .get()
    }

    /// Records resealed so far.
    pub fn resealed_count(&self) -> u64 {
        self.resealed.get()
    }

    /// Registers the counters in `registry` (one that prefixes `oncekey_`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(UNREADABLE.0, UNREADABLE.1, self.unreadable.clone());
        registry.register(RESEALED.0, RESEALED.1, self.resealed.clone());
    }

    /// The counters as a collector, for a registry that prefixes `oncekey_`.
    pub fn collector(&self) -> Box<dyn Collector> {
        Box::new(self.clone())
    }
}

impl Collector for SealingMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (name, help) = UNREADABLE;
        let metric = encoder.encode_descriptor(name, help, None, self.unreadable.metric_type())?;
        self.unreadable.encode(metric)?;
        let (name, help) = RESEALED;
        let metric = encoder.encode_descriptor(name, help, None, self.resealed.metric_type())?;
        self.resealed.encode(metric)
    }
}
