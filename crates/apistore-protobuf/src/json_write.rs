//! Writing JSON text the way Go's `encoding/json.Marshal` does: its string escaping
//! (HTML characters, U+2028/U+2029, invalid UTF-8 as U+FFFD), its float formatting,
//! and `compact` for the raw JSON that `MarshalJSON` methods return.

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string with Go's escaping. `s` may be invalid UTF-8: each
/// invalid byte becomes `\ufffd`, as Go's `utf8.DecodeRune` sees it.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if b < 0x80 {
            let esc: Option<&[u8]> = match b {
                b'"' => Some(b"\\\""),
                b'\\' => Some(b"\\\\"),
                b'\n' => Some(b"\\n"),
                b'\r' => Some(b"\\r"),
                b'\t' => Some(b"\\t"),
                0x08 => Some(b"\\b"),
                0x0c => Some(b"\\f"),
                _ => None,
            };
            if let Some(e) = esc {
                out.extend_from_slice(&s[start..i]);
                out.extend_from_slice(e);
                start = i + 1;
            } else if b < 0x20 || b == b'<' || b == b'>' || b == b'&' {
                out.extend_from_slice(&s[start..i]);
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
                start = i + 1;
            }
            i += 1;
            continue;
        }
        match utf8_len(&s[i..]) {
            Some(n) => {
                if n == 3 && s[i] == 0xe2 && s[i + 1] == 0x80 && (s[i + 2] & 0xfe) == 0xa8 {
                    out.extend_from_slice(&s[start..i]);
                    out.extend_from_slice(b"\\u202");
                    out.push(HEX[usize::from(s[i + 2] & 0xf)]);
                    start = i + 3;
                }
                i += n;
            }
            None => {
                out.extend_from_slice(&s[start..i]);
                out.extend_from_slice(b"\\ufffd");
                i += 1;
                start = i;
            }
        }
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

/// The length of the valid UTF-8 sequence at the start of `s` (first byte >= 0x80),
/// or `None` if it is invalid there.
pub(crate) fn utf8_len(s: &[u8]) -> Option<usize> {
    let n = match s[0] {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    let seq = s.get(..n)?;
    std::str::from_utf8(seq).ok().map(|_| n)
}

/// The number `serde_json` reads from Go's text for a float64 (`2` is an integer),
/// which is what a reader of the JSON holds; fails for NaN and infinities.
pub(crate) fn go_number(f: f64) -> Result<serde_json::Number, String> {
    let mut text = Vec::with_capacity(24);
    write_f64(&mut text, f)?;
    serde_json::from_slice(&text).map_err(|e| e.to_string())
}

/// Appends a float64 as Go's encoding/json does, or fails for NaN and infinities.
pub(crate) fn write_f64(out: &mut Vec<u8>, f: f64) -> Result<(), String> {
    if !f.is_finite() {
        return Err(format!("json: unsupported value: {f}"));
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust's {:e} is the shortest round-trip form, like Go's 'e' with precision -1;
        // Go then writes the exponent with a sign and at least two digits, and
        // encoding/json trims e-07 back to e-7.
        let s = format!("{f:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        out.extend_from_slice(mantissa.as_bytes());
        out.push(b'e');
        match exp.strip_prefix('-') {
            Some(neg) => {
                out.push(b'-');
                out.extend_from_slice(neg.as_bytes());
            }
            None => {
                out.push(b'+');
                if exp.len() < 2 {
                    out.push(b'0');
                }
                out.extend_from_slice(exp.as_bytes());
            }
        }
    } else {
        out.extend_from_slice(format!("{f}").as_bytes());
    }
    Ok(())
}

/// Appends an integer.
pub(crate) fn write_int(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends raw JSON text compacted as Go's `json.Compact` with HTML escaping does when
/// it copies a `MarshalJSON` result: insignificant whitespace removed, `<`, `>`, `&`,
/// U+2028 and U+2029 escaped. Fails, as Go does, if the text is not one valid JSON value.
pub(crate) fn write_compact(out: &mut Vec<u8>, raw: &[u8]) -> Result<(), String> {
    validate(raw)?;
    let mut in_str = false;
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if in_str {
            match c {
                b'\\' => {
                    out.push(c);
                    if let Some(&n) = raw.get(i + 1) {
                        out.push(n);
                    }
                    i += 2;
                    continue;
                }
                b'"' => in_str = false,
                b'<' | b'>' | b'&' => {
                    out.extend_from_slice(b"\\u00");
                    out.push(HEX[usize::from(c >> 4)]);
                    out.push(HEX[usize::from(c & 0xf)]);
                    i += 1;
                    continue;
                }
                0xe2 if raw.get(i + 1) == Some(&0x80)
                    && raw.get(i + 2).is_some_and(|b| b & 0xfe == 0xa8) =>
                {
                    out.extend_from_slice(b"\\u202");
                    out.push(HEX[usize::from(raw[i + 2] & 0xf)]);
                    i += 3;
                    continue;
                }
                _ => {}
            }
            out.push(c);
        } else {
            match c {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b'"' => {
                    in_str = true;
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
        i += 1;
    }
    Ok(())
}

/// Checks raw JSON as Go does before copying a `MarshalJSON` result: one valid JSON
/// value (Go's grammar), nothing after it but whitespace.
pub(crate) fn validate(raw: &[u8]) -> Result<(), String> {
    let mut v = Validator {
        s: raw,
        pos: 0,
        depth: 0,
    };
    let r = v.value().and_then(|()| {
        v.ws();
        if v.pos == raw.len() {
            Ok(())
        } else {
            Err(format!(
                "invalid character after top-level value at offset {}",
                v.pos
            ))
        }
    });
    r.map_err(|e| format!("json: error calling MarshalJSON: {e}"))
}

/// A JSON syntax checker with Go's grammar (what its scanner accepts).
struct Validator<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Validator<'_> {
    fn ws(&mut self) {
        while matches!(self.s.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        if self.pos >= self.s.len() {
            Err("unexpected end of JSON input".into())
        } else {
            Err(format!("{what} at offset {}", self.pos))
        }
    }

    fn value(&mut self) -> Result<(), String> {
        self.ws();
        match self.s.get(self.pos) {
            Some(b'{') => {
                self.nest()?;
                self.pos += 1;
                self.ws();
                if self.s.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                } else {
                    loop {
                        self.ws();
                        if self.s.get(self.pos) != Some(&b'"') {
                            return self.err("expected object key");
                        }
                        self.string()?;
                        self.ws();
                        if self.s.get(self.pos) != Some(&b':') {
                            return self.err("expected ':'");
                        }
                        self.pos += 1;
                        self.value()?;
                        self.ws();
                        match self.s.get(self.pos) {
                            Some(b',') => self.pos += 1,
                            Some(b'}') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return self.err("expected ',' or '}'"),
                        }
                    }
                }
                self.depth -= 1;
                Ok(())
            }
            Some(b'[') => {
                self.nest()?;
                self.pos += 1;
                self.ws();
                if self.s.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                } else {
                    loop {
                        self.value()?;
                        self.ws();
                        match self.s.get(self.pos) {
                            Some(b',') => self.pos += 1,
                            Some(b']') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return self.err("expected ',' or ']'"),
                        }
                    }
                }
                self.depth -= 1;
                Ok(())
            }
            Some(b'"') => self.string(),
            Some(b't') => self.lit(b"true"),
            Some(b'f') => self.lit(b"false"),
            Some(b'n') => self.lit(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.err("invalid character looking for beginning of value"),
        }
    }

    fn nest(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > 10_000 {
            return self.err("exceeded max depth");
        }
        Ok(())
    }

    fn lit(&mut self, word: &[u8]) -> Result<(), String> {
        if self.s[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            self.err("invalid literal")
        }
    }

    fn string(&mut self) -> Result<(), String> {
        self.pos += 1;
        loop {
            match self.s.get(self.pos) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => match self.s.get(self.pos + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                        self.pos += 2;
                    }
                    Some(b'u') => {
                        let hex = self.s.get(self.pos + 2..self.pos + 6);
                        if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                            return self.err("invalid \\u escape");
                        }
                        self.pos += 6;
                    }
                    _ => return self.err("invalid escape"),
                },
                Some(&c) if c < 0x20 => return self.err("control character in string"),
                Some(_) => self.pos += 1,
            }
        }
    }

    fn number(&mut self) -> Result<(), String> {
        let digits = |v: &mut Self| {
            let st = v.pos;
            while v.s.get(v.pos).is_some_and(u8::is_ascii_digit) {
                v.pos += 1;
            }
            v.pos > st
        };
        if self.s.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.s.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return self.err("invalid number"),
        }
        if self.s.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if !digits(self) {
                return self.err("invalid number");
            }
        }
        if matches!(self.s.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.s.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !digits(self) {
                return self.err("invalid number");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &[u8]) -> String {
        let mut o = Vec::new();
        write_str(&mut o, x);
        String::from_utf8(o).unwrap()
    }

    #[test]
    fn strings_escape_like_go() {
        assert_eq!(s(b"a<b>&c"), r#""a\u003cb\u003e\u0026c""#);
        assert_eq!(s("x\u{2028}y\u{2029}".as_bytes()), r#""x\u2028y\u2029""#);
        assert_eq!(
            s(b"\x00\x01\x08\x0c\n\r\t\"\\/"),
            r#""\u0000\u0001\b\f\n\r\t\"\\/""#
        );
        assert_eq!(s(b"a\xffb\xe2\x82"), r#""a\ufffdb\ufffd\ufffd""#);
        assert_eq!(s("héllo €𝄞".as_bytes()), "\"héllo €𝄞\"");
        assert_eq!(s(b"\xed\xa0\x80"), r#""\ufffd\ufffd\ufffd""#);
    }

    #[test]
    fn floats_format_like_go() {
        let f = |x: f64| {
            let mut o = Vec::new();
            write_f64(&mut o, x).unwrap();
            String::from_utf8(o).unwrap()
        };
        assert_eq!(f(0.0), "0");
        assert_eq!(f(-0.0), "-0");
        assert_eq!(f(1.5), "1.5");
        assert_eq!(f(100.0), "100");
        assert_eq!(f(1e20), "100000000000000000000");
        assert_eq!(f(1e21), "1e+21");
        assert_eq!(f(1.5e300), "1.5e+300");
        assert_eq!(f(0.000001), "0.000001");
        assert_eq!(f(0.0000001), "1e-7");
        assert_eq!(f(1.25e-10), "1.25e-10");
        assert_eq!(f(0.1), "0.1");
        assert!(write_f64(&mut Vec::new(), f64::NAN).is_err());
    }

    #[test]
    fn compact_strips_whitespace_and_escapes_html() {
        let mut o = Vec::new();
        write_compact(&mut o, b" { \"a\" : [ 1 , \"<x> \\\"&\" ] , \"b\":null }\n").unwrap();
        assert_eq!(o, br#"{"a":[1,"\u003cx\u003e \"\u0026"],"b":null}"#);
        for bad in [&b""[..], b"{", b"[1,]", b"tru", b"1 2", b"\"\x01\"", b"01"] {
            assert!(write_compact(&mut Vec::new(), bad).is_err(), "{bad:?}");
        }
    }
}
