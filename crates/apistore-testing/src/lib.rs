//! apistore-testing (being built).
