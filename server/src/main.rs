//! The `oncekey` command.
fn main() {}
