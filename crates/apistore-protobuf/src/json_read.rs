//! Reading JSON input for the encoder: a small tree that keeps each value's raw text,
//! because Go's `RawExtension`, `FieldsV1` and apiextensions `JSON` keep the bytes of
//! their value exactly as they were written (whitespace and key order included).
//!
//! Strings decode as Go's `encoding/json` decodes them: invalid UTF-8 and lone
//! surrogates become U+FFFD.

use std::borrow::Cow;

use crate::error::ProtobufError;

/// Nesting limit for JSON input; Go's is 10,000, ours (200) keeps the recursive parser far
/// from the stack's end.
const MAX_JSON_DEPTH: usize = 200;

/// A JSON value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum J<'a> {
    Null,
    Bool(bool),
    /// The number's text, checked against JSON's grammar.
    Num(&'a str),
    Str(Cow<'a, str>),
    Arr(Vec<Node<'a>>),
    Obj(Vec<(Cow<'a, str>, Node<'a>)>),
}

/// A JSON value with the raw text it was parsed from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node<'a> {
    pub(crate) raw: &'a [u8],
    pub(crate) v: J<'a>,
}

/// Parses one JSON value (surrounding whitespace allowed).
pub(crate) fn parse(s: &[u8]) -> Result<Node<'_>, ProtobufError> {
    let mut p = Parser {
        s,
        pos: 0,
        depth: 0,
    };
    let v = p.value()?;
    p.ws();
    if p.pos != s.len() {
        return Err(p.err("invalid character after top-level value"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, reason: &str) -> ProtobufError {
        ProtobufError::Json {
            offset: self.pos,
            reason: if self.pos >= self.s.len() {
                "unexpected end of JSON input".into()
            } else {
                reason.into()
            },
        }
    }

    fn ws(&mut self) {
        while matches!(self.s.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Result<Node<'a>, ProtobufError> {
        self.ws();
        let start = self.pos;
        let v = match self.s.get(self.pos) {
            Some(b'{') => {
                self.enter()?;
                self.pos += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.s.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                } else {
                    loop {
                        self.ws();
                        if self.s.get(self.pos) != Some(&b'"') {
                            return Err(self.err("expected string for object key"));
                        }
                        let k = self.string()?;
                        self.ws();
                        if self.s.get(self.pos) != Some(&b':') {
                            return Err(self.err("expected ':' after object key"));
                        }
                        self.pos += 1;
                        let v = self.value()?;
                        fields.push((k, v));
                        self.ws();
                        match self.s.get(self.pos) {
                            Some(b',') => self.pos += 1,
                            Some(b'}') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(self.err("expected ',' or '}' in object")),
                        }
                    }
                }
                self.depth -= 1;
                J::Obj(fields)
            }
            Some(b'[') => {
                self.enter()?;
                self.pos += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                } else {
                    loop {
                        items.push(self.value()?);
                        self.ws();
                        match self.s.get(self.pos) {
                            Some(b',') => self.pos += 1,
                            Some(b']') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(self.err("expected ',' or ']' in array")),
                        }
                    }
                }
                self.depth -= 1;
                J::Arr(items)
            }
            Some(b'"') => J::Str(self.string()?),
            Some(b't') => self.literal(b"true", J::Bool(true))?,
            Some(b'f') => self.literal(b"false", J::Bool(false))?,
            Some(b'n') => self.literal(b"null", J::Null)?,
            Some(b'-' | b'0'..=b'9') => J::Num(self.number()?),
            _ => return Err(self.err("invalid character looking for beginning of value")),
        };
        Ok(Node {
            raw: &self.s[start..self.pos],
            v,
        })
    }

    fn enter(&mut self) -> Result<(), ProtobufError> {
        self.depth += 1;
        if self.depth > MAX_JSON_DEPTH {
            return Err(self.err("JSON nested too deeply"));
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8], v: J<'a>) -> Result<J<'a>, ProtobufError> {
        if self.s[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn number(&mut self) -> Result<&'a str, ProtobufError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let st = p.pos;
            while p.s.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos > st
        };
        if self.s.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.s.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.err("invalid character in numeric literal")),
        }
        if self.s.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if !digits(self) {
                return Err(self.err("invalid character after decimal point"));
            }
        }
        if matches!(self.s.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.s.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.err("invalid character in exponent"));
            }
        }
        // Only ASCII digits, signs, '.', 'e' were consumed.
        std::str::from_utf8(&self.s[start..self.pos]).map_err(|_| self.err("invalid number"))
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let h = self.s.get(at..at + 4)?;
        let t = std::str::from_utf8(h).ok()?;
        if !t.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(t, 16).ok()
    }

    fn string(&mut self) -> Result<Cow<'a, str>, ProtobufError> {
        self.pos += 1;
        let start = self.pos;
        // Fast path: no escapes, valid UTF-8.
        let mut i = self.pos;
        while let Some(&c) = self.s.get(i) {
            if c == b'"' || c == b'\\' || c < 0x20 {
                break;
            }
            i += 1;
        }
        if self.s.get(i) == Some(&b'"') {
            if let Ok(text) = std::str::from_utf8(&self.s[start..i]) {
                self.pos = i + 1;
                return Ok(Cow::Borrowed(text));
            }
        }
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return Err(self.err("unexpected end of JSON input in string"));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    break;
                }
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos + 1) else {
                        return Err(self.err("unexpected end of JSON input in string escape"));
                    };
                    let simple = match e {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0c),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(b) = simple {
                        out.push(b);
                        self.pos += 2;
                        continue;
                    }
                    if e != b'u' {
                        return Err(self.err("invalid character in string escape code"));
                    }
                    let Some(u) = self.hex4(self.pos + 2) else {
                        return Err(self.err("invalid character in \\u hexadecimal escape"));
                    };
                    self.pos += 6;
                    let ch = if (0xd800..0xdc00).contains(&u) {
                        // A high surrogate: a low one must follow, else U+FFFD.
                        let low = (self.s.get(self.pos) == Some(&b'\\')
                            && self.s.get(self.pos + 1) == Some(&b'u'))
                        .then(|| self.hex4(self.pos + 2))
                        .flatten()
                        .filter(|l| (0xdc00..0xe000).contains(l));
                        match low {
                            Some(l) => {
                                self.pos += 6;
                                char::from_u32(0x10000 + ((u - 0xd800) << 10) + (l - 0xdc00))
                            }
                            None => None,
                        }
                    } else {
                        char::from_u32(u)
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(
                        ch.unwrap_or('\u{fffd}').encode_utf8(&mut buf).as_bytes(),
                    );
                }
                c if c < 0x20 => return Err(self.err("invalid character in string literal")),
                _ => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(Cow::Owned(match String::from_utf8(out) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_raw_text_and_decodes_strings_like_go() {
        let n = parse(br#" {"a" : [1, {"b":null}], "s":"x\u00e9\ud83d\ude00\ud800y\/"} "#).unwrap();
        let J::Obj(fields) = &n.v else { panic!() };
        assert_eq!(fields[0].1.raw, br#"[1, {"b":null}]"#);
        assert_eq!(fields[1].1.v, J::Str("xé😀\u{fffd}y/".into()));
        let n = parse(b"\"a\xffb\"").unwrap();
        assert_eq!(n.v, J::Str("a\u{fffd}b".into()));
        for bad in [
            &b"{"[..],
            b"[1,]",
            b"{\"a\" 1}",
            b"01",
            b"\"\x01\"",
            b"nul",
            b"1 2",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(250) + &"]".repeat(250);
        assert!(parse(deep.as_bytes()).is_err());
    }
}
