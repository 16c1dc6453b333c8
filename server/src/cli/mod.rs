//! The operator side of `oncekey`: token generation, the claim/complete/fail/lookup commands and
//! the operator's approve/reject/purge.

pub mod client;
pub mod gateway;
pub mod operations;
pub mod token;
