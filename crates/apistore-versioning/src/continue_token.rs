//! Continue tokens (placeholder until the full codec lands).
