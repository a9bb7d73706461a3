//! resource.Quantity's canonical string, as `ParseQuantity` then `String()` produce it:
//! the text is kept verbatim when Go's parser judges it canonical (so `"+1"` stays
//! `"+1"`), otherwise it is rewritten (`"1000m"` -> `"1"`, `"1.5"` -> `"1500m"`,
//! `"2048Ki"` -> `"2Mi"`).
//!
//! This follows Go's int64 fast path. Quantities that need Go's arbitrary-precision
//! path (more than 18 significant digits, or finer than a nanounit) are passed
//! through unchanged; that is a known difference from Go.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// [`canonical`], remembered per thread for the strings seen recently: a list of
/// objects repeats the same few quantities (`"1"`, `"512Mi"`, `"250m"`) in every
/// item, and most are already canonical, so this is usually a lookup that borrows.
pub(crate) fn canonical_cached(s: &str) -> Result<Cow<'_, str>, String> {
    /// Quantities remembered per thread before the cache starts over.
    const CAPACITY: usize = 512;
    /// Longer strings are not remembered.
    const LONGEST: usize = 64;
    /// Quantity text -> its canonical form when that differs (`None`: already canonical).
    type Seen = HashMap<Box<str>, Option<Box<str>>, BuildHasherDefault<Fnv>>;
    thread_local! {
        static SEEN: RefCell<Seen> = RefCell::new(HashMap::default());
    }
    if s.len() > LONGEST {
        return canonical(s);
    }
    let hit = SEEN.with(|seen| {
        seen.borrow()
            .get(s)
            .map(|c| c.as_ref().map(|c| String::from(&**c)))
    });
    match hit {
        Some(None) => Ok(Cow::Borrowed(s)),
        Some(Some(c)) => Ok(Cow::Owned(c)),
        None => {
            let c = canonical(s)?;
            let remembered = match &c {
                Cow::Borrowed(_) => None,
                Cow::Owned(o) => Some(Box::from(o.as_str())),
            };
            SEEN.with(|seen| {
                let mut seen = seen.borrow_mut();
                if seen.len() >= CAPACITY {
                    seen.clear();
                }
                seen.insert(Box::from(s), remembered);
            });
            Ok(c)
        }
    }
}

/// FNV-1a: the quantity cache's keys are a few short strings of our own process,
/// hashed on every decode of every quantity, where SipHash's resistance to chosen keys
/// buys nothing (a caller filling the cache with colliding keys only slows its own
/// lookups in a map cleared at 512 entries).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// The canonical form of a quantity string, or Go's parse error.
pub(crate) fn canonical(s: &str) -> Result<Cow<'_, str>, String> {
    if s.is_empty() {
        return Err("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into());
    }
    if s == "0" {
        return Ok(Cow::Borrowed(s));
    }
    let p = parse_string(s)?;
    let (exponent, format) = interpret(p.suffix).ok_or("unable to parse quantity's suffix")?;
    let binary = format == Format::BinarySi;
    let (precision, mut scale, mantissa): (i32, i32, i64) = if binary {
        if exponent >= 0 && p.denom.is_empty() {
            let prec = 15 - p.num.len() as i32 - ((exponent as f32) * 3.0 / 10.0) as i32 - 1;
            (prec, 0, 1i64 << exponent)
        } else {
            (-1, 0, 1)
        }
    } else {
        (18 - (p.num.len() + p.denom.len()) as i32, exponent, 1)
    };
    if precision < 0 {
        return Ok(Cow::Borrowed(s));
    }
    scale -= p.denom.len() as i32;
    if scale < -9 {
        return Ok(Cow::Borrowed(s));
    }
    let shifted = format!("{}{}", p.num, p.denom);
    let value: i64 = shifted
        .parse()
        .map_err(|_| "quantities must be numeric".to_string())?;
    let Some(mut result) = value.checked_mul(mantissa) else {
        return Ok(Cow::Borrowed(s));
    };
    if !p.positive {
        result = -result;
    }
    let cached = if binary {
        exponent % 10 == 0 && (value & 0x07) != 0
    } else {
        scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0')
    };
    if cached {
        return Ok(Cow::Borrowed(s));
    }
    Ok(Cow::Owned(
        canonicalize(result, scale, format).unwrap_or_else(|| s.to_string()),
    ))
}

/// CanonicalizeBytes for an int64 amount `value * 10^scale`; `None` where Go would
/// fall back to arbitrary precision.
fn canonicalize(value: i64, scale: i32, format: Format) -> Option<String> {
    if value == 0 {
        return Some("0".into());
    }
    if format == Format::BinarySi && value > -1024 && value < 1024 {
        return decimal(value, scale, Format::DecimalSi);
    }
    if format == Format::BinarySi {
        // scale is 0 on the binary fast path.
        let (amount, times) = remove_factors(value, 1024);
        let suffix = match times {
            1 => "Ki",
            2 => "Mi",
            3 => "Gi",
            4 => "Ti",
            5 => "Pi",
            6 => "Ei",
            _ => "",
        };
        return Some(format!("{amount}{suffix}"));
    }
    decimal(value, scale, format)
}

fn decimal(value: i64, scale: i32, format: Format) -> Option<String> {
    let (mut amount, times) = remove_factors(value, 10);
    let mut exponent = scale + times;
    match exponent % 3 {
        1 | -2 => {
            amount = amount.checked_mul(10)?;
            exponent -= 1;
        }
        2 | -1 => {
            amount = amount.checked_mul(100)?;
            exponent -= 2;
        }
        _ => {}
    }
    if format == Format::DecimalExponent {
        if exponent == 0 {
            return Some(amount.to_string());
        }
        return Some(format!("{amount}e{exponent}"));
    }
    // Go's decimal suffix table; an exponent outside it gets no suffix at all.
    let suffix = match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    };
    Some(format!("{amount}{suffix}"))
}

fn remove_factors(value: i64, base: i64) -> (i64, i32) {
    let neg = value < 0;
    let mut r = value.unsigned_abs();
    let b = base as u64;
    let mut times = 0;
    while r >= b && r % b == 0 {
        times += 1;
        r /= b;
    }
    let r = r as i64;
    (if neg { -r } else { r }, times)
}

/// Quantity's three formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// (exponent, format) for a suffix, as Go's suffixer interprets it.
fn interpret(suffix: &str) -> Option<(i32, Format)> {
    use Format::{BinarySi as B, DecimalExponent as X, DecimalSi as D};
    Some(match suffix {
        "n" => (-9, D),
        "u" => (-6, D),
        "m" => (-3, D),
        "" => (0, D),
        "k" => (3, D),
        "M" => (6, D),
        "G" => (9, D),
        "T" => (12, D),
        "P" => (15, D),
        "E" => (18, D),
        "Ki" => (10, B),
        "Mi" => (20, B),
        "Gi" => (30, B),
        "Ti" => (40, B),
        "Pi" => (50, B),
        "Ei" => (60, B),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            let e: i64 = s[1..].parse().ok()?;
            (e as i32, X)
        }
        _ => return None,
    })
}

struct Parsed<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Go's parseQuantityString, quirks included.
fn parse_string(s: &str) -> Result<Parsed<'_>, String> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    let zero = Parsed {
        positive,
        num: "0",
        denom: "",
        suffix: "",
    };
    if pos >= end {
        return Ok(zero);
    }
    let st = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let mut num = &s[st..pos];
    if pos >= end {
        return Ok(Parsed {
            positive,
            num,
            denom: "",
            suffix: "",
        });
    }
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let st = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[st..pos];
        if pos >= end {
            return Ok(Parsed {
                positive,
                num,
                denom,
                suffix: "",
            });
        }
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into());
    }
    Ok(Parsed {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_match_go() {
        for (input, want) in [
            ("0", "0"),
            ("1", "1"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("1.5", "1500m"),
            ("0.5", "500m"),
            ("1500m", "1500m"),
            ("+1", "+1"),
            ("010", "010"),
            ("1Gi", "1Gi"),
            ("2048Ki", "2Mi"),
            ("1024", "1024"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("129M", "129M"),
            ("1e3", "1e3"),
            ("1000E", "1"),
            ("12n", "12n"),
            ("0.1m", "100u"),
            ("-1", "-1"),
            ("-1000m", "-1"),
            ("512Mi", "512Mi"),
            ("500Mi", "500Mi"),
            ("1000e3", "1e6"),
            ("2000e-3", "2"),
            ("00", "0"),
        ] {
            assert_eq!(canonical(input).unwrap(), want, "{input}");
        }
        for bad in ["", "abc", "1x", "1.2.3", "1Mi5k"] {
            assert!(canonical(bad).is_err(), "{bad}");
        }
    }
}
