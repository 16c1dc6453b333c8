//! Namespace patterns, as the server's per-namespace settings write them (docs/api.md, "Intent
//! guard"): a namespace, a prefix ending in `*` (`payments.*`), or `*` for all; where several
//! match, the longest pattern applies (a whole name beats any prefix). Shared by the intent guard,
//! key privacy and retention ceilings; this module only parses and matches.

/// One namespace pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(String);

impl Pattern {
    /// Parses `text`; the error says what a pattern is.
    pub fn parse(text: &str) -> Result<Self, String> {
        let body = text.strip_suffix('*').unwrap_or(text);
        let valid = body
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
        if !valid || (body.is_empty() && !text.ends_with('*')) {
            return Err(
                "the pattern must be a namespace or a prefix ending in * (e.g. payments.*, or * for all)"
                    .into(),
            );
        }
        Ok(Self(text.to_owned()))
    }

    /// Whether `namespace` matches.
    pub fn matches(&self, namespace: &str) -> bool {
        match self.0.strip_suffix('*') {
            Some(prefix) => namespace.starts_with(prefix),
            None => self.0 == namespace,
        }
    }

    /// How specific the pattern is: a whole name beats any prefix, a longer prefix a shorter.
    fn rank(&self) -> (bool, usize) {
        (!self.0.ends_with('*'), self.0.len())
    }
}

/// Settings by namespace pattern: `get` answers the longest matching pattern's (of two equal
/// patterns, the later one's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByNamespace<T>(Vec<(Pattern, T)>);

impl<T> Default for ByNamespace<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T> ByNamespace<T> {
    /// Adds a setting for the namespaces `pattern` matches.
    pub fn push(&mut self, pattern: Pattern, value: T) {
        self.0.push((pattern, value));
    }

    /// Whether there is no setting.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The setting of `namespace`: the longest matching pattern's.
    pub fn get(&self, namespace: &str) -> Option<&T> {
        self.0
            .iter()
            .filter(|(p, _)| p.matches(namespace))
            .max_by_key(|(p, _)| p.rank())
            .map(|(_, v)| v)
    }

    /// Every setting, in the order given.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.0.iter().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(items: &[(&str, u32)]) -> ByNamespace<u32> {
        let mut rules = ByNamespace::default();
        for (p, v) in items {
            rules.push(Pattern::parse(p).unwrap(), *v);
        }
        rules
    }

    #[test]
    fn the_longest_matching_pattern_applies_and_a_name_beats_a_prefix() {
        let r = rules(&[
            ("*", 1),
            ("payments.*", 2),
            ("payments.refund", 3),
            ("payments.refund*", 4),
        ]);
        assert_eq!(r.get("email.send"), Some(&1));
        assert_eq!(r.get("payments.charge"), Some(&2));
        assert_eq!(r.get("payments.refund"), Some(&3));
        assert_eq!(r.get("payments.refunds"), Some(&4));
        assert_eq!(rules(&[("payments.*", 2)]).get("email"), None);
        // The same pattern twice: the later one.
        assert_eq!(rules(&[("x", 1), ("x", 2)]).get("x"), Some(&2));
    }

    #[test]
    fn a_pattern_is_a_namespace_or_a_prefix() {
        for ok in ["*", "payments.*", "payments.charge", "a-b_c.*"] {
            assert!(Pattern::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Pay", "a*b", "**", "a b", "é*"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
    }
}
