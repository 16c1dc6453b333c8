//! Durations as flags and variables spell them (`500ms`, `30s`, `5m`, `24h`, `30d`): one parser
//! for `serve`'s flags, the test knobs, the client commands, the gateway and the bench.

use crate::ledger::Millis;

/// Parses `500ms`, `30s`, `5m`, `24h`, `30d` (or a bare number of seconds) into milliseconds.
pub fn parse_duration(text: &str) -> Result<Millis, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: i64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 30s, 5m, 24h or 30d"))?;
    let scale = match unit {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too long"))
}
