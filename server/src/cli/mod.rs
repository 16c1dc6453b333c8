//! The operator side of `oncekey`: token generation and the claim/complete/fail/lookup commands.

pub mod client;
pub mod gateway;
pub mod token;
