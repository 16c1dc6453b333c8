//! The standard Prometheus process metrics on `/metrics`, read from `/proc/self` at each scrape:
//! `process_cpu_seconds_total` (user + system) and `process_resident_memory_bytes`. Operators size
//! the embedded store's pod by the second; `oncekey bench --server-metrics` divides the first by
//! the operations it measured. Absent where `/proc` is (not Linux).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc/self/stat`'s CPU times: 100 on every Linux platform Oncekey
/// targets (the kernel's USER_HZ).
const TICKS_PER_SECOND: f64 = 100.0;
/// Bytes per page of `/proc/self/statm` (4 KiB on x86-64 and the usual arm64 kernels).
const PAGE_BYTES: u64 = 4096;

/// Encodes the process metrics on each scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// CPU seconds (user + system) this process has used, from `/proc/self/stat`.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_cpu_seconds(&stat)
}

/// User + system time from a `/proc/<pid>/stat` line (fields 14 and 15; the command name, field
/// 2, is in parentheses and may contain spaces).
fn parse_cpu_seconds(stat: &str) -> Option<f64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user + system) as f64 / TICKS_PER_SECOND)
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * PAGE_BYTES)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(seconds) = cpu_seconds() {
            let counter = ConstCounter::new(seconds);
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        if let Some(bytes) = resident_bytes() {
            let gauge = ConstGauge::new(bytes as i64);
            let metric = encoder.encode_descriptor(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                None,
                gauge.metric_type(),
            )?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_times_are_read_past_a_command_name_with_spaces() {
        let stat = "4242 (tokio rt) x) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 75 0 0 20 0 2 0";
        assert_eq!(parse_cpu_seconds(stat), Some(3.25));
        assert_eq!(parse_cpu_seconds("garbage"), None);
        assert!(cpu_seconds().is_some_and(|s| s >= 0.0));
        assert!(resident_bytes().is_some_and(|b| b > 0));
    }
}
