//! The operator side of `oncekey`: token generation, the claim/complete/fail/lookup commands and
//! `records list`.

pub mod client;
pub mod gateway;
pub mod records;
pub mod token;
