//! Crate-level tests through the public API: specials both ways, inline fields,
//! omitempty and null rules, unknown fields, hostile bytes.
