//! metav1.Time, metav1.MicroTime and metav1.Duration between their protobuf numbers and
//! Go's JSON text: RFC 3339 in UTC (`Time` at seconds, `MicroTime` with six fraction
//! digits) and `time.Duration.String()` / `time.ParseDuration`.

/// Seconds from 0001-01-01T00:00:00Z (Go's zero `time.Time`) to the Unix epoch.
pub(crate) const ZERO_TIME_UNIX: i64 = -62_135_596_800;

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's algorithm, in i128 so no input can overflow.
    let z = i128::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i128::from(m <= 2);
    (y as i64, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn push2(out: &mut Vec<u8>, v: u32) {
    out.push(b'0' + (v / 10) as u8);
    out.push(b'0' + (v % 10) as u8);
}

/// Appends `"2006-01-02T15:04:05Z"` (with `micros`, `".000000"` before the `Z`).
/// Years outside 0..=9999 are written as Go's `appendInt(year, 4)` does.
pub(crate) fn write_rfc3339(out: &mut Vec<u8>, secs: i64, micros: Option<u32>) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    out.push(b'"');
    if y < 0 {
        out.push(b'-');
    }
    let ya = y.unsigned_abs();
    if ya < 10_000 {
        // The common case, without formatting machinery: four digits.
        push2(out, (ya / 100) as u32);
        push2(out, (ya % 100) as u32);
    } else {
        out.extend_from_slice(ya.to_string().as_bytes());
    }
    out.push(b'-');
    push2(out, m);
    out.push(b'-');
    push2(out, d);
    out.push(b'T');
    push2(out, rem / 3600);
    out.push(b':');
    push2(out, rem / 60 % 60);
    out.push(b':');
    push2(out, rem % 60);
    if let Some(us) = micros {
        out.push(b'.');
        let us = us % 1_000_000;
        push2(out, us / 10_000);
        push2(out, us / 100 % 100);
        push2(out, us % 100);
    }
    out.extend_from_slice(b"Z\"");
}

/// Parses Go's `time.RFC3339` (any fraction) or, with `micro`, `RFC3339Micro` (exactly
/// six fraction digits). Returns Unix seconds and nanoseconds.
pub(crate) fn parse_rfc3339(s: &str, micro: bool) -> Result<(i64, u32), String> {
    let bad = || format!("parsing time {s:?} as RFC 3339");
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Result<u32, String> {
        let part = b.get(r).ok_or_else(bad)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        part.iter()
            .try_fold(0u32, |a, &c| Some(a * 10 + u32::from(c - b'0')))
            .ok_or_else(bad)
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let mdays = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > mdays[(month - 1) as usize]
        || hour > 23
        || min > 59
        || sec > 59
    {
        return Err(format!("{}: value out of range", bad()));
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if matches!(b.get(i), Some(b'.' | b',')) {
        let st = i + 1;
        i = st;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let digits = &b[st..i];
        if digits.is_empty() || (micro && digits.len() != 6) {
            return Err(bad());
        }
        for k in 0..9 {
            nanos = nanos * 10 + digits.get(k).map_or(0, |&c| u32::from(c - b'0'));
        }
    } else if micro {
        return Err(bad());
    }
    let offset = match &b[i..] {
        b"Z" => 0i64,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return Err(format!("{}: time zone offset out of range", bad()));
            }
            let o = i64::from(oh * 3600 + om * 60);
            if *sign == b'-' { -o } else { o }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + min * 60 + sec) - offset;
    Ok((secs, nanos))
}

/// Appends Go's `time.Duration(nanos).String()`, e.g. `1h0m0s`, `1.5s`, `300ms`, `0s`.
pub(crate) fn write_duration(out: &mut Vec<u8>, nanos: i64) {
    let mut u = nanos.unsigned_abs();
    let mut s = String::new();
    if nanos < 0 {
        s.push('-');
    }
    let frac = |v: u64, prec: u32| -> (String, u64) {
        let p = 10u64.pow(prec);
        let f = v % p;
        if f == 0 {
            return (String::new(), v / p);
        }
        let digits = format!("{f:0width$}", width = prec as usize);
        (format!(".{}", digits.trim_end_matches('0')), v / p)
    };
    if u < 1_000_000_000 {
        let (unit, prec) = match u {
            0 => {
                out.extend_from_slice(b"\"0s\"");
                return;
            }
            1..=999 => ("ns", 0),
            1_000..=999_999 => ("µs", 3),
            _ => ("ms", 6),
        };
        let (f, int) = frac(u, prec);
        s.push_str(&format!("{int}{f}{unit}"));
    } else {
        let (f, secs) = frac(u, 9);
        u = secs;
        let (h, m, sec) = (u / 3600, u / 60 % 60, u % 60);
        if h > 0 {
            s.push_str(&format!("{h}h{m}m"));
        } else if u >= 60 {
            s.push_str(&format!("{m}m"));
        }
        s.push_str(&format!("{sec}{f}s"));
    }
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// Parses Go's `time.ParseDuration` syntax (`1h30m`, `-1.5s`, `300ms`, `0`).
pub(crate) fn parse_duration(s: &str) -> Result<i64, String> {
    let bad = || format!("time: invalid duration {s:?}");
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: f64 = 0.0;
    let mut exact: i128 = 0;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {s:?}"))?;
        let (num, tail) = rest.split_at(n);
        if num.is_empty() || num == "." {
            return Err(bad());
        }
        let u = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(u);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {unit:?} in duration {s:?}")),
        };
        let (int, fr) = num.split_once('.').unwrap_or((num, ""));
        let int: i128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        exact = exact
            .checked_add(int.checked_mul(scale).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        if !fr.is_empty() {
            let f: f64 = format!("0.{fr}").parse().map_err(|_| bad())?;
            total += f * scale as f64;
        }
        rest = tail;
    }
    let v = exact + total as i128;
    let v = if neg { -v } else { v };
    i64::try_from(v).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64, micros: Option<u32>) -> String {
        let mut o = Vec::new();
        write_rfc3339(&mut o, secs, micros);
        String::from_utf8(o).unwrap()
    }

    #[test]
    fn times_format_and_parse() {
        assert_eq!(t(0, None), "\"1970-01-01T00:00:00Z\"");
        assert_eq!(t(1_700_000_000, None), "\"2023-11-14T22:13:20Z\"");
        assert_eq!(
            t(1_700_000_000, Some(1_500)),
            "\"2023-11-14T22:13:20.001500Z\""
        );
        assert_eq!(t(ZERO_TIME_UNIX, None), "\"0001-01-01T00:00:00Z\"");
        assert_eq!(t(-62_198_755_200, None), "\"-0001-01-01T00:00:00Z\"");
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20Z", false),
            Ok((1_700_000_000, 0))
        );
        assert_eq!(
            parse_rfc3339("2023-11-15T00:13:20.25+02:00", false),
            Ok((1_700_000_000, 250_000_000))
        );
        assert_eq!(
            parse_rfc3339("0001-01-01T00:00:00Z", false),
            Ok((ZERO_TIME_UNIX, 0))
        );
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20.001500Z", true),
            Ok((1_700_000_000, 1_500_000))
        );
        for bad in [
            "",
            "2023-11-14",
            "2023-02-30T00:00:00Z",
            "2023-11-14T22:13:20",
            "2023-11-14 22:13:20Z",
        ] {
            assert!(parse_rfc3339(bad, false).is_err(), "{bad}");
        }
        assert!(parse_rfc3339("2023-11-14T22:13:20Z", true).is_err());
        assert!(parse_rfc3339("2023-11-14T22:13:20.0015Z", true).is_err());
    }

    #[test]
    fn durations_format_and_parse_like_go() {
        let d = |n: i64| {
            let mut o = Vec::new();
            write_duration(&mut o, n);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(d(0), "\"0s\"");
        assert_eq!(d(3_600_000_000_000), "\"1h0m0s\"");
        assert_eq!(d(1_500_000_000), "\"1.5s\"");
        assert_eq!(d(90_000_000_000), "\"1m30s\"");
        assert_eq!(d(300_000_000), "\"300ms\"");
        assert_eq!(d(1_500), "\"1.5µs\"");
        assert_eq!(d(7), "\"7ns\"");
        assert_eq!(d(-1_500_000_000), "\"-1.5s\"");
        assert_eq!(parse_duration("1h0m0s"), Ok(3_600_000_000_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("-300ms"), Ok(-300_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5x").is_err());
    }
}
