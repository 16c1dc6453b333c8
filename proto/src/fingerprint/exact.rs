//! Lossless numbers (docs/api.md#numbers): RFC 8785 compares numbers as IEEE 754 doubles, so two
//! JSON texts whose numbers differ beyond what a double holds would share a fingerprint. A number is
//! accepted only when its canonical form keeps its exact value and its magnitude is at most
//! 2^53 − 1, where every integer is exactly a double in every language; any other number is
//! refused, naming its JSON path, so the caller sends it as a string instead.
//!
//! This module only judges numbers and names where they are; the JSON text has been parsed and
//! validated (`super::parse`) before `first_inexact` reads it.

use std::fmt;

/// The largest magnitude a fingerprinted number may have: 2^53 − 1, the largest integer every
/// smaller integer of which a double holds exactly (JavaScript's `Number.MAX_SAFE_INTEGER`).
pub const MAX_EXACT: f64 = 9_007_199_254_740_991.0;

/// Why a number cannot be fingerprinted as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inexact {
    /// Its magnitude exceeds 2^53 − 1: beyond it, neighbouring integers share a double.
    Magnitude,
    /// It has more precision than a double keeps: its canonical form would change its value.
    Precision,
}

impl fmt::Display for Inexact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Inexact::Magnitude => {
                "a number beyond ±(2^53−1) (9007199254740991) cannot be fingerprinted exactly"
            }
            Inexact::Precision => {
                "a number with more digits than a double keeps cannot be fingerprinted exactly"
            }
        })
    }
}

/// Judges a number that already is a double (or an integer converted to one exactly).
pub fn check_value(value: f64) -> Result<(), Inexact> {
    if value.abs() > MAX_EXACT {
        Err(Inexact::Magnitude)
    } else {
        Ok(())
    }
}

/// Judges an integer (of a language's integer type, before any conversion to a double).
pub fn check_integer(value: i128) -> Result<(), Inexact> {
    if value.unsigned_abs() > MAX_EXACT as u128 {
        Err(Inexact::Magnitude)
    } else {
        Ok(())
    }
}

/// Judges a JSON number literal, given the double it denotes and that double's canonical text.
fn check_literal(literal: &str, canonical: &str) -> Result<(), Inexact> {
    if Decimal::of(literal) == Decimal::of(canonical) {
        Ok(())
    } else {
        Err(Inexact::Precision)
    }
}

/// The exact decimal value of a JSON number literal: zero, or a sign, significant digits without
/// leading or trailing zeros, and the power of ten of the last digit.
#[derive(Debug, PartialEq, Eq)]
enum Decimal {
    Zero,
    NonZero {
        negative: bool,
        digits: String,
        exponent: i64,
    },
}

impl Decimal {
    fn of(literal: &str) -> Decimal {
        let (negative, unsigned) = match literal.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, literal),
        };
        let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (&unsigned[..at], saturating_exponent(&unsigned[at + 1..])),
            None => (unsigned, 0),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all: String = whole.chars().chain(fraction.chars()).collect();
        let significant = all.trim_start_matches('0');
        let trimmed = significant.trim_end_matches('0');
        if trimmed.is_empty() {
            return Decimal::Zero;
        }
        let trailing = (significant.len() - trimmed.len()) as i64;
        Decimal::NonZero {
            negative,
            digits: trimmed.to_owned(),
            exponent: exponent
                .saturating_sub(fraction.len() as i64)
                .saturating_add(trailing),
        }
    }
}

/// An exponent's value (`+12`, `-3`, `7`), saturating far beyond any double's range.
fn saturating_exponent(text: &str) -> i64 {
    let (sign, digits) = match text.as_bytes().first() {
        Some(b'-') => (-1, &text[1..]),
        Some(b'+') => (1, &text[1..]),
        _ => (1, text),
    };
    let magnitude = digits.bytes().fold(0i64, |n, d| {
        n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
    });
    sign * magnitude
}

/// Where a number sits in a JSON document, as a JSONPath (`$.order.lines[2].qty`): members whose
/// names are identifiers as `.name`, others as `["name"]` (JSON string syntax), items as `[i]`.
#[derive(Default)]
pub(super) struct Path {
    steps: Vec<Step>,
}

enum Step {
    Member(String),
    Item(usize),
}

impl Path {
    pub(super) fn member(&mut self, name: &str) {
        self.steps.push(Step::Member(name.to_owned()));
    }
    pub(super) fn item(&mut self, index: usize) {
        self.steps.push(Step::Item(index));
    }
    pub(super) fn pop(&mut self) {
        self.steps.pop();
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for step in &self.steps {
            match step {
                Step::Item(i) => write!(f, "[{i}]")?,
                Step::Member(name) if is_identifier(name) => write!(f, ".{name}")?,
                Step::Member(name) => {
                    let quoted = serde_json::to_string(name).map_err(|_| fmt::Error)?;
                    write!(f, "[{quoted}]")?
                }
            }
        }
        Ok(())
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A container being read, and whether it has put a step on the path.
enum Frame {
    /// An array, at this item (its step is always on the path).
    Array(usize),
    /// An object: whether a member name comes next, and whether the current member's name is on
    /// the path.
    Object { expect_name: bool, named: bool },
}

/// The first number of a valid JSON text, in text order, that cannot be fingerprinted exactly, with
/// its path; `canonical` prints a double as the canonical form does.
pub(super) fn first_inexact(
    text: &str,
    canonical: impl Fn(f64) -> String,
) -> Option<(String, Inexact)> {
    let bytes = text.as_bytes();
    let mut frames: Vec<Frame> = Vec::new();
    let mut path = Path::default();
    let mut at = 0;
    while at < bytes.len() {
        let mut next = at + 1;
        match bytes[at] {
            b'{' => frames.push(Frame::Object {
                expect_name: true,
                named: false,
            }),
            b'[' => {
                frames.push(Frame::Array(0));
                path.item(0);
            }
            b'}' | b']' => {
                if let Some(Frame::Array(_) | Frame::Object { named: true, .. }) = frames.pop() {
                    path.pop();
                }
            }
            b',' => match frames.last_mut() {
                Some(Frame::Array(i)) => {
                    *i += 1;
                    path.pop();
                    path.item(*i);
                }
                Some(Frame::Object { expect_name, named }) => {
                    if *named {
                        path.pop();
                    }
                    *expect_name = true;
                    *named = false;
                }
                None => {}
            },
            b'"' => {
                next = string_end(bytes, at);
                if let Some(Frame::Object { expect_name, named }) = frames.last_mut() {
                    if *expect_name {
                        let name: String =
                            serde_json::from_str(&text[at..next]).unwrap_or_default();
                        path.member(&name);
                        *expect_name = false;
                        *named = true;
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                next = at
                    + bytes[at..]
                        .iter()
                        .position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                        .unwrap_or(bytes.len() - at);
                let literal = &text[at..next];
                let value: f64 = literal.parse().unwrap_or(f64::INFINITY);
                let verdict =
                    check_value(value).and_then(|()| check_literal(literal, &canonical(value)));
                if let Err(why) = verdict {
                    return Some((path.to_string(), why));
                }
            }
            _ => {}
        }
        at = next;
    }
    None
}

/// The index just past the string that starts with the quote at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::super::{canonicalize_json, canonicalize_value, FingerprintError};
    use super::*;

    fn refused(text: &str) -> (String, Inexact) {
        match canonicalize_json(text) {
            Err(FingerprintError::InexactNumber { path, why }) => (path, why),
            other => panic!("{text}: expected a refused number, got {other:?}"),
        }
    }

    #[test]
    fn integers_up_to_2_pow_53_minus_1_are_kept_beyond_it_refused() {
        for ok in ["9007199254740991", "-9007199254740991", "0", "-0", "1250"] {
            assert!(canonicalize_json(ok).is_ok(), "{ok}");
        }
        for text in [
            "9007199254740992",
            "-9007199254740992",
            "9007199254740993",
            "12345678901234567890",
            "18446744073709551615",
            "100000000000000000000",
        ] {
            assert_eq!(refused(text), ("$".into(), Inexact::Magnitude), "{text}");
        }
    }

    #[test]
    fn a_literal_whose_canonical_form_keeps_its_value_is_accepted() {
        for ok in [
            "0.1",
            "4.50",
            "1.0",
            "10e-1",
            "0.1e1",
            "1e-7",
            "123e-20",
            "5e-324",
            "2e-308",
            "0.30000000000000004",
            "333333333.3333333",
            "-12.5e1",
            "0.000000000000000000000000001",
            "-0.0",
        ] {
            assert!(canonicalize_json(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_literal_with_more_digits_than_its_double_keeps_is_refused() {
        for text in [
            "0.1000000000000000055511151231257827",
            "0.10000000000000001",
            "333333333.33333329",
            "1e-400",
            "9.007199254740993e15",
        ] {
            let (path, _) = refused(text);
            assert_eq!(path, "$", "{text}");
        }
    }

    #[test]
    fn large_doubles_are_refused_whatever_their_form() {
        // Every double of magnitude 2^53 or more is an integer a JavaScript client cannot tell
        // from its neighbours: refused in every form, as in every client library.
        for text in ["1e21", "1E30", "1.5e300", "9007199254740992.0"] {
            assert_eq!(refused(text).1, Inexact::Magnitude, "{text}");
        }
    }

    #[test]
    fn the_path_names_the_first_refused_number_in_text_order() {
        for (text, path) in [
            (r#"{"id":1234567890123456789}"#, "$.id"),
            (
                r#"{"a":[1,{"b c":[2,9007199254740993]}]}"#,
                r#"$.a[1]["b c"][1]"#,
            ),
            (r#"[{}, {"x":{}}, [], [[]], 12345678901234567890]"#, "$[4]"),
            (r#"{"a":{},"b":[],"c":{"d":1},"e":1e300}"#, "$.e"),
            (r#"{"k\"q":9007199254740993}"#, r#"$["k\"q"]"#),
            (r#"{"1st":[0.5, "9007199254740993", 2e400e0]}"#, ""),
            (
                r#"{"_x9":{"y":[0, 0.1000000000000000055511151231257827, 1e300]}}"#,
                "$._x9.y[1]",
            ),
            (r#"{"é":[1e300]}"#, r#"$["é"][0]"#),
        ] {
            if path.is_empty() {
                assert!(matches!(
                    canonicalize_json(text),
                    Err(FingerprintError::InvalidJson(_))
                ));
                continue;
            }
            assert_eq!(refused(text).0, path, "{text}");
        }
    }

    #[test]
    fn the_error_names_the_path_but_never_the_number() {
        let err = canonicalize_json(r#"{"id":1234567890123456789}"#)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("$.id: "), "{err}");
        assert!(err.contains("send it as a string"), "{err}");
        assert!(!err.contains("123456789"), "{err}");
    }

    #[test]
    fn values_are_judged_like_texts() {
        let path = |v: serde_json::Value| match canonicalize_value(&v) {
            Err(FingerprintError::InexactNumber { path, .. }) => path,
            other => panic!("{v}: {other:?}"),
        };
        assert_eq!(
            path(serde_json::json!({"id": 9_007_199_254_740_992u64})),
            "$.id"
        );
        assert_eq!(path(serde_json::json!({"n": [1, i64::MIN]})), "$.n[1]");
        assert_eq!(path(serde_json::json!([{"x": 1.5e300}])), "$[0].x");
        assert_eq!(path(serde_json::json!(u64::MAX)), "$");
        let ok = serde_json::json!({"id": 9_007_199_254_740_991u64, "neg": -9_007_199_254_740_991i64, "f": 0.1});
        assert_eq!(
            canonicalize_value(&ok).unwrap(),
            r#"{"f":0.1,"id":9007199254740991,"neg":-9007199254740991}"#
        );
    }
}
