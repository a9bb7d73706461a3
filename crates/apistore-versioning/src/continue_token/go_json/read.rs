//! Reading the token's JSON with Go's `json.Unmarshal` semantics (see the parent module).

use super::RawToken;

/// Go's `maxNestingDepth` in `encoding/json`'s scanner.
const MAX_NESTING_DEPTH: usize = 10_000;

/// Reads a token as `json.Unmarshal(data, &continueToken{})` does; the error says what
/// is wrong with the JSON.
pub(in crate::continue_token) fn read_token(data: &[u8]) -> Result<RawToken, String> {
    let mut reader = Reader { data, pos: 0 };
    let mut token = RawToken::default();
    reader.skip_whitespace();
    match reader.peek() {
        Some(b'{') => reader.read_token_object(&mut token)?,
        Some(b'n') => reader.expect_literal(b"null")?,
        Some(_) => {
            let kind = reader.skip_value(0)?;
            return Err(format!(
                "cannot unmarshal {kind} into a continue token object"
            ));
        }
        None => return Err("unexpected end of JSON input".to_owned()),
    }
    reader.skip_whitespace();
    match reader.peek() {
        None => Ok(token),
        Some(byte) => Err(format!(
            "invalid character {} after top-level value",
            describe(byte)
        )),
    }
}

/// The field of the token an object key names, after Go's case folding.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    Version,
    ResourceVersion,
    Start,
    Unknown,
}

impl Field {
    pub(super) fn from_key(key: &str) -> Self {
        let folded: String = key.chars().map(fold).collect();
        match folded.as_str() {
            "V" => Self::Version,
            "RV" => Self::ResourceVersion,
            "START" => Self::Start,
            _ => Self::Unknown,
        }
    }
}

/// Go's name folding (`unicode.ToUpper(unicode.ToLower(r))`), exact for every rune that
/// folds onto an ASCII letter; other runes cannot match an ASCII field name anyway.
fn fold(ch: char) -> char {
    match ch {
        'a'..='z' => ch.to_ascii_uppercase(),
        '\u{17f}' => 'S',
        '\u{212a}' => 'K',
        '\u{130}' | '\u{131}' => 'I',
        _ => ch,
    }
}

fn describe(byte: u8) -> String {
    if byte.is_ascii_graphic() || byte == b' ' {
        format!("'{}'", char::from(byte))
    } else {
        format!("'\\x{byte:02x}'")
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn unexpected(&self, context: &str) -> String {
        match self.peek() {
            Some(byte) => format!("invalid character {} {context}", describe(byte)),
            None => "unexpected end of JSON input".to_owned(),
        }
    }

    fn expect(&mut self, byte: u8, context: &str) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.unexpected(context))
        }
    }

    fn expect_literal(&mut self, literal: &[u8]) -> Result<(), String> {
        for &byte in literal {
            self.expect(byte, "in literal")?;
        }
        Ok(())
    }

    /// The object at the top level: known fields are stored, others skipped.
    fn read_token_object(&mut self, token: &mut RawToken) -> Result<(), String> {
        self.expect(b'{', "looking for beginning of object")?;
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(self.unexpected("looking for beginning of object key string"));
            }
            let key = self.read_string()?;
            self.skip_whitespace();
            self.expect(b':', "after object key")?;
            self.skip_whitespace();
            let field = Field::from_key(&key);
            let is_null = self.data.get(self.pos..self.pos + 4) == Some(b"null");
            if field == Field::Unknown || is_null {
                // Go leaves a field untouched when the value is null.
                self.skip_value(1)?;
            } else if field == Field::ResourceVersion {
                token.resource_version = self.read_int64()?;
            } else if self.peek() == Some(b'"') {
                let text = self.read_string()?;
                if field == Field::Version {
                    token.version = text;
                } else {
                    token.start = text;
                }
            } else {
                let kind = self.skip_value(1)?;
                return Err(format!(
                    "cannot unmarshal {kind} into field {key:?} (a string)"
                ));
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.unexpected("after object key:value pair")),
            }
        }
    }

    /// `rv`: a JSON number that is also a decimal int64 literal (Go's `ParseInt`).
    fn read_int64(&mut self) -> Result<i64, String> {
        if !matches!(self.peek(), Some(b'-' | b'0'..=b'9')) {
            let kind = self.skip_value(1)?;
            return Err(format!(
                "cannot unmarshal {kind} into field \"rv\" (an int64)"
            ));
        }
        let start = self.pos;
        self.skip_number()?;
        let literal = self.data.get(start..self.pos).unwrap_or_default();
        std::str::from_utf8(literal)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
            .ok_or_else(|| {
                format!(
                    "cannot unmarshal number {} into field \"rv\" (an int64)",
                    String::from_utf8_lossy(literal)
                )
            })
    }

    fn skip_number(&mut self) -> Result<(), String> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.skip_digits(),
            _ => return Err(self.unexpected("in numeric literal")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.require_digit()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.require_digit()?;
        }
        Ok(())
    }

    fn require_digit(&mut self) -> Result<(), String> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(self.unexpected("in numeric literal"));
        }
        self.skip_digits();
        Ok(())
    }

    fn skip_digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// A string literal, decoded as Go's `unquote` does.
    fn read_string(&mut self) -> Result<String, String> {
        self.expect(b'"', "looking for beginning of string")?;
        let mut bytes = Vec::new();
        loop {
            let Some(byte) = self.next() else {
                return Err("unexpected end of JSON input".to_owned());
            };
            match byte {
                b'"' => break,
                b'\\' => self.read_escape(&mut bytes)?,
                0x00..=0x1f => {
                    return Err(format!(
                        "invalid character {} in string literal",
                        describe(byte)
                    ));
                }
                _ => bytes.push(byte),
            }
        }
        Ok(go_lossy_utf8(&bytes))
    }

    fn read_escape(&mut self, bytes: &mut Vec<u8>) -> Result<(), String> {
        let simple = match self.next() {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'/') => b'/',
            Some(b'b') => 0x08,
            Some(b'f') => 0x0c,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                let first = self.read_hex4()?;
                let ch = if (0xd800..0xe000).contains(&first) {
                    self.read_low_surrogate(first)
                } else {
                    char::from_u32(first).unwrap_or('\u{fffd}')
                };
                let mut buf = [0; 4];
                bytes.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                return Ok(());
            }
            Some(_) => {
                self.pos -= 1;
                return Err(self.unexpected("in string escape code"));
            }
            None => return Err(self.unexpected("in string escape code")),
        };
        bytes.push(simple);
        Ok(())
    }

    /// After a surrogate `\uXXXX`: consume a following low surrogate if the two make a
    /// pair, otherwise yield U+FFFD and leave what follows alone (as Go does).
    fn read_low_surrogate(&mut self, high: u32) -> char {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        if high < 0xdc00 && rest.starts_with(b"\\u") {
            let low = rest.get(2..6).and_then(parse_hex4);
            if let Some(low @ 0xdc00..=0xdfff) = low {
                self.pos += 6;
                let code = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
                return char::from_u32(code).unwrap_or('\u{fffd}');
            }
        }
        '\u{fffd}'
    }

    fn read_hex4(&mut self) -> Result<u32, String> {
        for _ in 0..4 {
            if !self.peek().is_some_and(|byte| byte.is_ascii_hexdigit()) {
                return Err(self.unexpected("in \\u hexadecimal character escape"));
            }
            self.pos += 1;
        }
        let digits = self.data.get(self.pos - 4..self.pos).unwrap_or_default();
        Ok(parse_hex4(digits).unwrap_or(0xfffd))
    }

    /// Skips any JSON value, checking its syntax; returns what kind of value it was.
    /// `depth` is how many containers already enclose it (for Go's nesting limit).
    fn skip_value(&mut self, depth: usize) -> Result<&'static str, String> {
        let kind = match self.peek() {
            Some(b'{') => "object",
            Some(b'[') => "array",
            Some(b'"') => "string",
            Some(b't' | b'f') => "bool",
            Some(b'n') => "null",
            Some(b'-' | b'0'..=b'9') => "number",
            _ => return Err(self.unexpected("looking for beginning of value")),
        };
        // Open containers: `true` for an object, `false` for an array.
        let mut open: Vec<bool> = Vec::new();
        loop {
            self.skip_whitespace();
            // One scalar or container opening.
            match self.peek() {
                Some(b'{') | Some(b'[') => {
                    let object = self.peek() == Some(b'{');
                    self.pos += 1;
                    open.push(object);
                    if depth + open.len() > MAX_NESTING_DEPTH {
                        return Err("exceeded max depth".to_owned());
                    }
                    self.skip_whitespace();
                    let close = if object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        open.pop();
                    } else {
                        if object {
                            self.skip_object_key()?;
                        }
                        continue;
                    }
                }
                Some(b'"') => {
                    self.read_string()?;
                }
                Some(b't') => self.expect_literal(b"true")?,
                Some(b'f') => self.expect_literal(b"false")?,
                Some(b'n') => self.expect_literal(b"null")?,
                Some(b'-' | b'0'..=b'9') => self.skip_number()?,
                _ => return Err(self.unexpected("looking for beginning of value")),
            }
            // After a complete value: close containers or move to the next element.
            loop {
                let Some(&object) = open.last() else {
                    return Ok(kind);
                };
                self.skip_whitespace();
                let close = if object { b'}' } else { b']' };
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if object {
                            self.skip_whitespace();
                            self.skip_object_key()?;
                        }
                        break;
                    }
                    Some(byte) if byte == close => {
                        self.pos += 1;
                        open.pop();
                    }
                    _ => {
                        let context = if object {
                            "after object key:value pair"
                        } else {
                            "after array element"
                        };
                        return Err(self.unexpected(context));
                    }
                }
            }
        }
    }

    fn skip_object_key(&mut self) -> Result<(), String> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected("looking for beginning of object key string"));
        }
        self.read_string()?;
        self.skip_whitespace();
        self.expect(b':', "after object key")
    }
}

/// Four hex digits (exactly: no sign, no more, no fewer) as a number.
fn parse_hex4(digits: &[u8]) -> Option<u32> {
    if digits.len() != 4 {
        return None;
    }
    digits.iter().try_fold(0, |value, &byte| {
        char::from(byte)
            .to_digit(16)
            .map(|digit| value * 16 + digit)
    })
}

/// Bytes to text the way Go's JSON decoder does it: each byte that does not start a
/// valid UTF-8 sequence becomes one U+FFFD.
fn go_lossy_utf8(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(text) => {
                out.push_str(text);
                break;
            }
            Err(err) => {
                let (head, tail) = rest.split_at(err.valid_up_to());
                out.push_str(std::str::from_utf8(head).unwrap_or_default());
                out.push('\u{fffd}');
                rest = tail.get(1..).unwrap_or_default();
            }
        }
    }
    out
}
