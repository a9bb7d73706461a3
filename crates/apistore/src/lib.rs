//! apistore facade (being built).
