//! The default fingerprinted arguments and key of a call, the same in every client library
//! (docs/api.md#default-arguments-and-key): the call's arguments as a JSON array in parameter order,
//! trailing nulls dropped, and the key `sha256:<hex of their fingerprint>`. A Rust caller passes
//! the arguments as a tuple — `(to, subject)`, `(order,)` for one — so that a Rust service and a
//! Python, Go or TypeScript one claiming the same call claim one operation.
//!
//! Byte strings are standard base64 text in the other languages: serialize a Rust byte buffer
//! that way (serde writes `Vec<u8>` as an array of numbers).

use crate::connect::Client;
use crate::error::Error;
use crate::key::OperationKey;
use crate::once::Once;
use serde::Serialize;

/// The default fingerprinted arguments of a call whose arguments are the tuple `args`: a JSON array
/// without its trailing nulls.
pub fn default_arguments<A: Serialize + ?Sized>(args: &A) -> Result<serde_json::Value, Error> {
    let value = serde_json::to_value(args).map_err(|e| Error::Fingerprint(e.to_string()))?;
    let serde_json::Value::Array(mut items) = value else {
        return Err(Error::Fingerprint(
            "the default arguments are a tuple of the call's arguments, e.g. (to, subject) or (order,)"
                .into(),
        ));
    };
    while items.last().is_some_and(serde_json::Value::is_null) {
        items.pop();
    }
    Ok(serde_json::Value::Array(items))
}

/// The default key of a call in `namespace` whose arguments are the tuple `args`:
/// `sha256:<64 lowercase hex of the fingerprint of its default arguments>`.
pub fn default_key<A: Serialize + ?Sized>(
    namespace: &str,
    args: &A,
) -> Result<OperationKey, Error> {
    key_of(namespace, &default_arguments(args)?)
}

/// The default key of default arguments already made.
fn key_of(namespace: &str, arguments: &serde_json::Value) -> Result<OperationKey, Error> {
    let fingerprint = Client::fingerprint(arguments)?;
    OperationKey::from_raw(namespace, format!("sha256:{}", hex::encode(fingerprint)))
        .map_err(|e| Error::Fingerprint(e.to_string()))
}

impl Client {
    /// Prepares a call in `namespace` to be run once, with the default key and fingerprinted
    /// arguments every client library derives from the call's arguments (`args`: their tuple).
    pub fn once_call<A: Serialize + ?Sized>(
        &self,
        namespace: &str,
        args: &A,
    ) -> Result<Once, Error> {
        let arguments = default_arguments(args)?;
        Ok(self.once(&key_of(namespace, &arguments)?, &arguments))
    }
}
