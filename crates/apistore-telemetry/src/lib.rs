//! apistore-telemetry (being built).
