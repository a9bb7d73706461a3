//! The apistore command (being built).
fn main() {}
