//! Developer commands (being built).
fn main() {}
