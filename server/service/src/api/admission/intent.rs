//! The intent guard's settings (docs/api.md, "Intent guard"): rules `PATTERN=MODE[/WINDOW]` from
//! `--intent-guard` and the limits file's `intent-guard=` key, and the rule a Claim runs under —
//! the namespace's setting made stricter (never looser) by the Claim's own fields.

use crate::api::pattern::{ByNamespace, Pattern};
use crate::duration::parse_duration;
use oncekey_ledger::{
    GuardMode, IntentRule, Millis, DEFAULT_INTENT_WINDOW, MAX_INTENT_WINDOW, MIN_INTENT_WINDOW,
};

/// The rules of one tenant (or the flag's, for every tenant without its own): the mode and
/// window of the namespaces each pattern matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntentRules(ByNamespace<(GuardMode, Millis)>);

impl IntentRules {
    /// Parses rules separated by `sep` (`,` for the flag's environment variable, `;` in the
    /// limits file); blank items are skipped.
    pub fn parse(text: &str, sep: char) -> Result<Self, String> {
        let mut rules = ByNamespace::default();
        for item in text.split(sep).map(str::trim).filter(|s| !s.is_empty()) {
            let (pattern, setting) = parse_rule(item)?;
            rules.push(pattern, setting);
        }
        Ok(Self(rules))
    }

    /// Rules from several flag values (each may hold several, comma-separated).
    pub fn from_flags(values: &[String]) -> Result<Self, String> {
        Self::parse(&values.join(","), ',')
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The mode and window of `namespace`: the longest matching pattern's (a name beats `*`).
    pub fn setting(&self, namespace: &str) -> Option<(GuardMode, Millis)> {
        self.0.get(namespace).copied()
    }

    /// The rule a Claim of `namespace` runs under, given its own `mode` (`None`: unspecified),
    /// `window` and `repeat`; `None` when nothing guards it.
    pub fn rule(
        &self,
        namespace: &str,
        mode: Option<GuardMode>,
        window: Option<Millis>,
        repeat: bool,
    ) -> Option<IntentRule> {
        let (set_mode, set_window) = self
            .setting(namespace)
            .unwrap_or((GuardMode::Off, DEFAULT_INTENT_WINDOW));
        let mode = set_mode.max(mode.unwrap_or(GuardMode::Off));
        (mode != GuardMode::Off).then(|| IntentRule {
            mode,
            window: set_window.max(window.unwrap_or(0)),
            repeat,
        })
    }
}

fn parse_rule(item: &str) -> Result<(Pattern, (GuardMode, Millis)), String> {
    let (pattern, rest) = item.split_once('=').ok_or_else(|| {
        format!("intent guard rule {item:?}: expected PATTERN=MODE[/WINDOW], e.g. payments.*=refuse/10m")
    })?;
    let (mode, window) = match rest.split_once('/') {
        Some((mode, window)) => (mode, Some(window)),
        None => (rest, None),
    };
    let pattern =
        Pattern::parse(pattern).map_err(|e| format!("intent guard rule {item:?}: {e}"))?;
    let mode = match mode {
        "off" => GuardMode::Off,
        "warn" => GuardMode::Warn,
        "refuse" => GuardMode::Refuse,
        other => {
            return Err(format!(
                "intent guard rule {item:?}: mode {other:?} is not off, warn or refuse"
            ))
        }
    };
    let window = match window {
        None => DEFAULT_INTENT_WINDOW,
        Some(text) => {
            let ms = parse_duration(text)
                .map_err(|e| format!("intent guard rule {item:?}: window: {e}"))?;
            if !(MIN_INTENT_WINDOW..=MAX_INTENT_WINDOW).contains(&ms) {
                return Err(format!(
                    "intent guard rule {item:?}: the window must be 1s ..= 24h"
                ));
            }
            ms
        }
    };
    Ok((pattern, (mode, window)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_pattern_wins_and_a_claim_only_tightens() {
        let rules = IntentRules::from_flags(&[
            "*=warn".into(),
            "payments.*=refuse/1h,payments.refund=off".into(),
        ])
        .unwrap();
        assert_eq!(
            rules.setting("email.send"),
            Some((GuardMode::Warn, 600_000))
        );
        assert_eq!(
            rules.setting("payments.charge"),
            Some((GuardMode::Refuse, 3_600_000))
        );
        assert_eq!(rules.setting("payments.refund").unwrap().0, GuardMode::Off);
        // A Claim asking for off under refuse stays refused; one asking refuse under off refuses.
        let r = rules.rule("payments.charge", Some(GuardMode::Off), None, false);
        assert_eq!(r.unwrap().mode, GuardMode::Refuse);
        let r = rules.rule(
            "payments.refund",
            Some(GuardMode::Refuse),
            Some(5_000),
            true,
        );
        assert_eq!(r.unwrap().window, 600_000);
        assert!(rules.rule("payments.refund", None, None, false).is_none());
        assert!(IntentRules::default()
            .rule("x", None, None, false)
            .is_none());
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (text, says) in [
            ("payments", "PATTERN=MODE"),
            ("Pay=warn", "pattern"),
            ("a*b=warn", "pattern"),
            ("x=block", "mode"),
            ("x=warn/0s", "window"),
            ("x=warn/25h", "window"),
            ("x=warn/soon", "window"),
        ] {
            let err = IntentRules::parse(text, ',').unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
