//! The embedded store's metrics on `/metrics`, read from the writer's `Stats` at each scrape: how
//! well group commit works (`oncekey_embedded_writes_total` over `oncekey_embedded_syncs_total`),
//! how often redb checkpoints, and whether the store refuses writes until a restart (alert on
//! `oncekey_embedded_write_failed` = 1; `/readyz` fails too).

use super::writer::Stats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Encodes `Stats` on each scrape.
#[derive(Debug)]
pub(crate) struct StatsCollector(pub Arc<Stats>);

impl Collector for StatsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = &self.0;
        let counters = [
            (
                "embedded_writes",
                "conditional writes the embedded store's writer applied or refused",
                &stats.writes,
            ),
            (
                "embedded_syncs",
                "syncs of the write-ahead log plus durable redb commits (group commit: fewer than writes)",
                &stats.fsyncs,
            ),
            (
                "embedded_checkpoints",
                "durable redb commits after which the write-ahead log starts over",
                &stats.checkpoints,
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value.load(Ordering::Relaxed));
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        let failed = ConstGauge::new(i64::from(stats.broken.load(Ordering::Relaxed)));
        failed.encode(encoder.encode_descriptor(
            "embedded_write_failed",
            "1 when a write to the log or redb failed and the store refuses writes until a restart",
            None,
            failed.metric_type(),
        )?)?;
        Ok(())
    }
}
