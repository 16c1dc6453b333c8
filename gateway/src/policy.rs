//! What an upstream outcome does to an acquired key, under the key's semantics: the table of
//! docs/gateway.md ("What an upstream outcome does to the key") as pure decisions.
//!
//! - A response head: stored (its body read and Completed), released (Failed RETRYABLE and
//!   returned as is), or refused (a 1xx such as 101 Switching Protocols is no answer the gateway
//!   can store or proxy).
//! - No complete answer (no connection, timeout, broken connection, body cut short): released,
//!   unless the request may have reached the upstream under at-most-once, which leaves the
//!   outcome unknown.
//!
//! No I/O here; `forward` carries the decisions out.

use http::StatusCode;

/// What a response head decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Read the body; a whole one is Completed and replayed (or, too large, Failed FINAL 507).
    Store,
    /// Fail the key RETRYABLE and return the response as is: the next request goes upstream.
    Release,
    /// Not an answer the gateway proxies (1xx): 502 problem, and the key settled as an
    /// outcome the upstream may have acted on ([`no_answer`] with `sent`).
    Refuse,
}

/// What a request without a complete answer does to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoAnswer {
    /// Fail it RETRYABLE: the next request with the key goes upstream again.
    Release,
    /// Leave the outcome unknown: the lease is ended, nothing is recorded, and the key answers
    /// 409 "outcome unknown" until reconciled.
    Unknown,
}

/// The operator's part of the rules: `--retryable-status`.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    retryable_status: Vec<u16>,
}

impl Policy {
    /// The rules with `--retryable-status` `codes`.
    pub fn new(retryable_status: Vec<u16>) -> Self {
        Policy { retryable_status }
    }

    /// What a response head with `status` decides for a key of the given semantics.
    pub fn head(&self, status: StatusCode, at_most_once: bool) -> Head {
        if status.is_informational() {
            Head::Refuse
        } else if self.retryable_status.contains(&status.as_u16())
            || (!at_most_once && try_again(status))
        {
            Head::Release
        } else {
            Head::Store
        }
    }
}

/// What a request without a complete answer decides; `sent` when it may have reached the
/// upstream (a connection was open for it).
pub fn no_answer(sent: bool, at_most_once: bool) -> NoAnswer {
    if sent && at_most_once {
        NoAnswer::Unknown
    } else {
        NoAnswer::Release
    }
}

/// The statuses at-least-once never stores: 5xx, 408, 425, 429.
pub fn try_again(status: StatusCode) -> bool {
    status.is_server_error() || matches!(status.as_u16(), 408 | 425 | 429)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(code: u16) -> StatusCode {
        StatusCode::from_u16(code).unwrap()
    }

    #[test]
    fn at_least_once_releases_server_errors_and_try_again_statuses() {
        let p = Policy::default();
        for code in [500, 502, 503, 504, 599, 408, 425, 429] {
            assert_eq!(p.head(s(code), false), Head::Release, "{code}");
        }
        for code in [200, 201, 204, 301, 400, 401, 404, 409, 422, 499] {
            assert_eq!(p.head(s(code), false), Head::Store, "{code}");
        }
    }

    #[test]
    fn at_most_once_stores_every_complete_answer_but_the_listed_ones() {
        let p = Policy::new(vec![429, 503]);
        for code in [200, 201, 404, 408, 425, 500, 502, 504] {
            assert_eq!(p.head(s(code), true), Head::Store, "{code}");
        }
        for code in [429, 503] {
            assert_eq!(p.head(s(code), true), Head::Release, "{code}");
        }
    }

    #[test]
    fn listed_statuses_add_to_the_at_least_once_set() {
        let p = Policy::new(vec![409]);
        assert_eq!(p.head(s(409), false), Head::Release);
        assert_eq!(p.head(s(500), false), Head::Release);
        assert_eq!(p.head(s(404), false), Head::Store);
    }

    #[test]
    fn informational_answers_are_never_stored_nor_proxied() {
        let p = Policy::new(vec![101]);
        for mode in [false, true] {
            assert_eq!(p.head(s(101), mode), Head::Refuse);
        }
    }

    #[test]
    fn only_a_request_that_may_have_arrived_is_left_unknown_and_only_at_most_once() {
        assert_eq!(no_answer(false, true), NoAnswer::Release);
        assert_eq!(no_answer(true, true), NoAnswer::Unknown);
        assert_eq!(no_answer(true, false), NoAnswer::Release);
        assert_eq!(no_answer(false, false), NoAnswer::Release);
    }
}
