//! Deterministic operation keys: a namespace plus a key built from stable business parts and an
//! operation version, with child keys derived from a parent key and a step name.
//!
//! A key names one logical intent; every retry of that intent must compute the same key. This
//! module never makes up a key on its own: the only random constructor is the explicit
//! [`OperationKey::random`].

use std::fmt;

/// The longest key the server accepts, in bytes.
pub const MAX_KEY_BYTES: usize = 256;

/// Separates the parts of a key (`ticket-481:create-task:v1`).
const PART_SEPARATOR: char = ':';
/// Separates a parent key from a child step (`ticket-481:create-task:v1/notify`).
const STEP_SEPARATOR: char = '/';

/// Why a key cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The namespace does not match `^[a-z0-9][a-z0-9._-]{0,127}$`.
    #[error("invalid namespace {0:?}: expected ^[a-z0-9][a-z0-9._-]{{0,127}}$")]
    Namespace(String),
    /// A key needs at least one part, and no part may be empty.
    #[error("a key needs at least one part and no empty part")]
    EmptyPart,
    /// The key contains a control character.
    #[error("a key must not contain control characters")]
    ControlCharacter,
    /// The key is longer than 256 bytes.
    #[error("the key is {0} bytes long; at most 256 are allowed")]
    TooLong(usize),
}

/// One operation in the ledger: a namespace (the kind of operation, e.g. `payments.charge`) and an
/// idempotency key, with the parent operation it was derived from, if any.
///
/// Build keys from values that stay the same across every retry of the intent (order id, ticket id,
/// step name) and end with an operation version you bump when the operation's meaning changes:
///
/// ```
/// use oncekey_client::OperationKey;
/// let task = OperationKey::new("tasks.create", ["ticket-481", "create-task", "v1"]).unwrap();
/// assert_eq!(task.key(), "ticket-481:create-task:v1");
/// let email = task.child_in("email.send", "notify-assignee").unwrap();
/// assert_eq!(email.key(), "ticket-481:create-task:v1/notify-assignee");
/// assert_eq!(email.parent().unwrap().key(), task.key());
/// ```
///
/// Parts are joined with `:` and steps with `/`; a `%`, `:` or `/` inside a part is
/// percent-encoded, so different parts never produce the same key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OperationKey {
    namespace: String,
    key: String,
    parent: Option<Box<OperationKey>>,
}

impl OperationKey {
    /// A key from stable business parts, the last of which should be the operation version.
    pub fn new<I, P>(namespace: impl Into<String>, parts: I) -> Result<Self, KeyError>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<str>,
    {
        let mut key = String::new();
        for (i, part) in parts.into_iter().enumerate() {
            let part = part.as_ref();
            if part.is_empty() {
                return Err(KeyError::EmptyPart);
            }
            if i > 0 {
                key.push(PART_SEPARATOR);
            }
            escape_into(part, &mut key);
        }
        if key.is_empty() {
            return Err(KeyError::EmptyPart);
        }
        Self::checked(namespace.into(), key, None)
    }

    /// Starts a key built part by part; finish it with [`KeyBuilder::version`].
    pub fn builder(namespace: impl Into<String>) -> KeyBuilder {
        KeyBuilder {
            namespace: namespace.into(),
            parts: Vec::new(),
        }
    }

    /// A key taken verbatim (e.g. an `Idempotency-Key` header your own caller sent), validated
    /// but not escaped.
    pub fn from_raw(
        namespace: impl Into<String>,
        key: impl Into<String>,
    ) -> Result<Self, KeyError> {
        Self::checked(namespace.into(), key.into(), None)
    }

    /// A random key (`random-<32 hex digits>`).
    ///
    /// **Only for intents that have no stable identity of their own**, and only if you store the
    /// key before the first attempt and reuse the stored key for every retry: a key made up again
    /// on retry is a new intent, and the ledger will let the side effect happen twice.
    pub fn random(namespace: impl Into<String>) -> Result<Self, KeyError> {
        let key = format!("random-{:032x}", rand::random::<u128>());
        Self::checked(namespace.into(), key, None)
    }

    /// The key of a step of this operation, in the same namespace: `<this key>/<step>`, recording
    /// this operation as its parent.
    pub fn child(&self, step: &str) -> Result<Self, KeyError> {
        self.child_in(self.namespace.clone(), step)
    }

    /// The key of a step of this operation in another namespace (e.g. a workflow step that sends
    /// an email): `<this key>/<step>`, recording this operation as its parent.
    pub fn child_in(&self, namespace: impl Into<String>, step: &str) -> Result<Self, KeyError> {
        if step.is_empty() {
            return Err(KeyError::EmptyPart);
        }
        let mut key = self.key.clone();
        key.push(STEP_SEPARATOR);
        escape_into(step, &mut key);
        let parent = OperationKey {
            namespace: self.namespace.clone(),
            key: self.key.clone(),
            parent: None,
        };
        Self::checked(namespace.into(), key, Some(Box::new(parent)))
    }

    /// The namespace, e.g. `payments.charge`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The idempotency key sent to the server.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The parent operation this key was derived from (recorded in `Claim.parent`).
    pub fn parent(&self) -> Option<&OperationKey> {
        self.parent.as_deref()
    }

    /// Records `parent` as this operation's parent without changing the key.
    pub fn with_parent(mut self, parent: &OperationKey) -> Self {
        self.parent = Some(Box::new(OperationKey {
            namespace: parent.namespace.clone(),
            key: parent.key.clone(),
            parent: None,
        }));
        self
    }

    fn checked(
        namespace: String,
        key: String,
        parent: Option<Box<OperationKey>>,
    ) -> Result<Self, KeyError> {
        if !valid_namespace(&namespace) {
            return Err(KeyError::Namespace(namespace));
        }
        if key.is_empty() {
            return Err(KeyError::EmptyPart);
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(KeyError::TooLong(key.len()));
        }
        if key.chars().any(char::is_control) {
            return Err(KeyError::ControlCharacter);
        }
        Ok(OperationKey {
            namespace,
            key,
            parent,
        })
    }
}

impl fmt::Display for OperationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.key)
    }
}

/// Builds an [`OperationKey`] part by part.
#[derive(Debug, Clone)]
pub struct KeyBuilder {
    namespace: String,
    parts: Vec<String>,
}

impl KeyBuilder {
    /// Adds a stable business part (an order id, a ticket id, a step name).
    pub fn part(mut self, part: impl fmt::Display) -> Self {
        self.parts.push(part.to_string());
        self
    }

    /// Adds the operation version as the last part and builds the key.
    pub fn version(mut self, version: impl fmt::Display) -> Result<OperationKey, KeyError> {
        self.parts.push(version.to_string());
        OperationKey::new(self.namespace, &self.parts)
    }
}

fn escape_into(part: &str, out: &mut String) {
    for c in part.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
}

fn valid_namespace(ns: &str) -> bool {
    let bytes = ns.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && matches!(bytes[0], b'a'..=b'z' | b'0'..=b'9')
        && bytes
            .iter()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_deterministic_and_injective() {
        let a = OperationKey::new("tasks.create", ["ticket-481", "create-task", "v1"]).unwrap();
        let b = OperationKey::builder("tasks.create")
            .part("ticket-481")
            .part("create-task")
            .version("v1")
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.key(), "ticket-481:create-task:v1");
        let x = OperationKey::new("n", ["a:b", "c"]).unwrap();
        let y = OperationKey::new("n", ["a", "b:c"]).unwrap();
        assert_ne!(x.key(), y.key());
        assert_eq!(x.key(), "a%3Ab:c");
    }

    #[test]
    fn children_record_their_parent() {
        let order = OperationKey::new("orders.place", ["order-9", "v2"]).unwrap();
        let charge = order.child_in("payments.charge", "charge").unwrap();
        assert_eq!(charge.namespace(), "payments.charge");
        assert_eq!(charge.key(), "order-9:v2/charge");
        let parent = charge.parent().unwrap();
        assert_eq!(
            (parent.namespace(), parent.key()),
            ("orders.place", "order-9:v2")
        );
        let refund = charge.child("refund/partial").unwrap();
        assert_eq!(refund.key(), "order-9:v2/charge/refund%2Fpartial");
        assert_eq!(refund.parent().unwrap().key(), charge.key());
        assert!(refund.parent().unwrap().parent().is_none());
    }

    #[test]
    fn invalid_keys_are_refused() {
        assert!(matches!(
            OperationKey::new("Bad", ["x"]),
            Err(KeyError::Namespace(_))
        ));
        assert_eq!(
            OperationKey::new("n", Vec::<&str>::new()),
            Err(KeyError::EmptyPart)
        );
        assert_eq!(OperationKey::new("n", ["a", ""]), Err(KeyError::EmptyPart));
        assert_eq!(
            OperationKey::new("n", ["a\nb"]),
            Err(KeyError::ControlCharacter)
        );
        assert_eq!(
            OperationKey::new("n", ["x".repeat(257)]),
            Err(KeyError::TooLong(257))
        );
    }

    #[test]
    fn random_keys_are_explicit_and_distinct() {
        let a = OperationKey::random("n").unwrap();
        let b = OperationKey::random("n").unwrap();
        assert_ne!(a, b);
        assert!(a.key().starts_with("random-"));
    }
}
