//! The continue token's JSON, read and written as Go's `encoding/json` does.
//!
//! kube-apiserver marshals `{"v":…,"rv":…,"start":…}` with `json.Marshal` and reads it
//! back with `json.Unmarshal`. Tokens must be byte-identical in both directions, so this
//! module reproduces Go's rules instead of using serde_json:
//!
//! - writing: HTML-safe escaping (`<` `>` `&` as `\u003c` …), U+2028/U+2029 escaped,
//!   each invalid UTF-8 byte as `\ufffd`, short escapes for `\b \f \n \r \t`, other
//!   control characters as `\u00xx` in lower-case hex;
//! - reading: object keys matched case-insensitively (Go's field folding, so `"RV"` and
//!   `"ſtart"` count), the last duplicate wins, `null` leaves a field unset, unknown
//!   fields are skipped, invalid UTF-8 and lone surrogates become U+FFFD, and `rv` must
//!   be an integer literal that fits an `i64`.
//!
//! Reading never recurses: nested unknown values are skipped with an explicit stack, and
//! nesting deeper than Go's limit (10000) is refused as Go refuses it.

use std::fmt::Write as _;

mod read;

pub(super) use read::read_token;

/// The token's three fields, zero-valued when absent (as a Go struct would be).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct RawToken {
    pub(super) version: String,
    pub(super) resource_version: i64,
    pub(super) start: String,
}

/// Writes the token exactly as `json.Marshal(&continueToken{…})` does.
pub(super) fn write_token(version: &str, resource_version: i64, start: &[u8]) -> String {
    let mut out = String::with_capacity(start.len() + version.len() + 40);
    out.push_str("{\"v\":");
    write_string(&mut out, version.as_bytes());
    let _ = write!(out, ",\"rv\":{resource_version},\"start\":");
    write_string(&mut out, start);
    out.push('}');
    out
}

/// Writes `bytes` as a Go JSON string literal (HTML-safe, like `json.Marshal`).
pub(super) fn write_string(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut rest = bytes;
    while !rest.is_empty() {
        let (valid, invalid_len) = match std::str::from_utf8(rest) {
            Ok(text) => (text, 0),
            Err(err) => {
                let (head, _) = rest.split_at(err.valid_up_to());
                // `head` is valid by construction; Go consumes one byte per invalid
                // position, whatever Rust's notion of the maximal invalid sequence.
                (std::str::from_utf8(head).unwrap_or_default(), 1)
            }
        };
        for ch in valid.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                    let byte = ch as u8;
                    out.push_str("\\u00");
                    out.push(char::from(HEX[usize::from(byte >> 4)]));
                    out.push(char::from(HEX[usize::from(byte & 0xf)]));
                }
                '\u{2028}' => out.push_str("\\u2028"),
                '\u{2029}' => out.push_str("\\u2029"),
                _ => out.push(ch),
            }
        }
        let consumed = valid.len() + invalid_len;
        if invalid_len > 0 {
            out.push_str("\\ufffd");
        }
        rest = rest.get(consumed..).unwrap_or_default();
    }
    out.push('"');
}

#[cfg(test)]
mod tests;
