//! The types whose JSON Go writes by hand (`metav1.Time`, `resource.Quantity`,
//! `intstr.IntOrString`, `runtime.RawExtension`, apiextensions' `JSON` and
//! `JSONSchemaPropsOr*`, named slices): what their protobuf means as a JSON value.
//!
//! [`interpret`] reads a special message's merged segments into a [`SpecialValue`];
//! the JSON writer (`decode.rs`) writes it as text and the serde `Deserializer`
//! (`de/`) presents it to a visitor, so both agree by construction. The field walk
//! for ordinary structs is in `walk.rs`.

use std::borrow::Cow;

use crate::quantity;
use crate::schema::{Message, Special, Ty};
use crate::time::{ZERO_TIME_UNIX, write_duration, write_rfc3339};
use crate::walk::{Entries, collect, count, last_of};
use crate::wire::{Fields, WireVal};

/// The JSON value of a special type.
#[derive(Debug)]
pub(crate) enum SpecialValue<'s, 'a> {
    /// `null`.
    Null,
    /// A JSON string already written with its quotes, needing no escapes (times,
    /// durations).
    Quoted(Vec<u8>),
    /// A string to write with Go's escaping (a canonical Quantity).
    Text(Cow<'a, str>),
    /// Go string bytes (IntOrString's strVal), possibly invalid UTF-8.
    Str(&'a [u8]),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// Raw JSON bytes, to be compacted (and validated) as Go does.
    Raw(&'a [u8]),
    /// A present value of this type from these occurrences (the schema of a
    /// JSONSchemaPropsOr*).
    Present(&'s Ty, Entries<'a>),
    /// A non-empty list of `inner` from these occurrences, and its length (a hint
    /// for a named slice, whose malformed packed run is reported as it is read).
    Elements(&'s Ty, Entries<'a>, usize),
}

/// The text of a [`SpecialValue::Quoted`], its quotes taken off in place.
pub(crate) fn unquoted(mut quoted: Vec<u8>) -> Result<String, String> {
    quoted.pop();
    if !quoted.is_empty() {
        quoted.remove(0);
    }
    String::from_utf8(quoted).map_err(|_| "special value is not UTF-8".to_owned())
}

/// The value of special message `m` (not `Special::None` or `TypeMeta`) from its
/// merged segments.
pub(crate) fn interpret<'s, 'a>(
    m: &'s Message,
    segs: &[&'a [u8]],
) -> Result<SpecialValue<'s, 'a>, String> {
    Ok(match m.special {
        Special::None | Special::TypeMeta => {
            return Err(format!("{} is not a special type", m.name));
        }
        Special::Time | Special::MicroTime => time(m.special, segs)?,
        Special::Quantity => {
            let mut text: &[u8] = b"0";
            // Quantity.Unmarshal parses each field 1 it sees; the last one stays.
            for seg in segs {
                for item in Fields::new(seg) {
                    if let (1, v) = item? {
                        let WireVal::Bytes(b) = v else {
                            return Err("quantity string has the wrong wire type".into());
                        };
                        text = b;
                    }
                }
            }
            let s = std::str::from_utf8(text).map_err(|_| "quantity is not UTF-8")?;
            SpecialValue::Text(quantity::canonical_cached(s)?)
        }
        Special::Duration => {
            let n = match last_of(m, segs, [1])? {
                [Some(WireVal::Varint(x))] => x as i64,
                _ => 0,
            };
            let mut out = Vec::with_capacity(16);
            write_duration(&mut out, n);
            SpecialValue::Quoted(out)
        }
        Special::IntOrString => {
            let [kind, int_val, str_val] = last_of(m, segs, [1, 2, 3])?;
            match kind {
                None | Some(WireVal::Varint(0)) => {
                    let v = match int_val {
                        Some(WireVal::Varint(x)) => x as i32,
                        _ => 0,
                    };
                    SpecialValue::Int(i64::from(v))
                }
                Some(WireVal::Varint(1)) => match str_val {
                    Some(WireVal::Bytes(b)) => SpecialValue::Str(b),
                    _ => SpecialValue::Str(b""),
                },
                Some(_) => return Err("impossible IntOrString.Type".into()),
            }
        }
        Special::RawJson | Special::Json => {
            let raw = match last_of(m, segs, [1])? {
                [Some(WireVal::Bytes(b))] => Some(b),
                _ => None,
            };
            match raw {
                None => SpecialValue::Null,
                Some([]) if m.special == Special::Json => SpecialValue::Null,
                Some(b) => SpecialValue::Raw(b),
            }
        }
        Special::OrBool | Special::OrArray | Special::OrStringArray => schema_or(m, segs)?,
        Special::WrapSlice => {
            let e = collect(m, segs)?;
            let Some(f) = m.tagged(1) else {
                return Err("wrapped slice without items".into());
            };
            match &f.ty {
                _ if e.is_empty() => SpecialValue::Null,
                Ty::Slice(inner) => {
                    let len = count(inner, &e).unwrap_or(0);
                    SpecialValue::Elements(inner, e, len)
                }
                _ => return Err("wrapped slice without items".into()),
            }
        }
    })
}

fn time(special: Special, segs: &[&[u8]]) -> Result<SpecialValue<'static, 'static>, String> {
    // Time.Unmarshal replaces the value each time: the last segment is the value (an
    // empty one the zero time). Each is parsed all the same, as Go parses each
    // occurrence: a malformed earlier one fails the decode.
    let mut value = None;
    for seg in segs {
        if seg.is_empty() {
            value = None;
            continue;
        }
        let (mut secs, mut nanos) = (0i64, 0i64);
        for item in Fields::new(seg) {
            match item? {
                (1, WireVal::Varint(x)) => secs = x as i64,
                (2, WireVal::Varint(x)) => nanos = i64::from(x as i32),
                (1 | 2, _) => return Err("timestamp field has the wrong wire type".into()),
                _ => {}
            }
        }
        value = Some((secs, nanos));
    }
    let Some((mut secs, mut nanos)) = value else {
        return Ok(SpecialValue::Null);
    };
    if special == Special::Time {
        nanos = 0;
    } else {
        // Duration.Truncate(time.Microsecond) rounds toward zero; time.Unix then
        // normalises a negative remainder into the seconds.
        nanos -= nanos % 1000;
        secs = secs
            .checked_add(nanos.div_euclid(1_000_000_000))
            .ok_or("timestamp out of range")?;
        nanos = nanos.rem_euclid(1_000_000_000);
    }
    if secs == ZERO_TIME_UNIX && nanos == 0 {
        return Ok(SpecialValue::Null);
    }
    let micros = (special == Special::MicroTime).then_some((nanos / 1000) as u32);
    let mut out = Vec::with_capacity(32);
    write_rfc3339(&mut out, secs, micros);
    Ok(SpecialValue::Quoted(out))
}

/// JSONSchemaPropsOrBool / OrArray / OrStringArray: schema-or-something JSON.
fn schema_or<'s, 'a>(m: &'s Message, segs: &[&'a [u8]]) -> Result<SpecialValue<'s, 'a>, String> {
    let e = collect(m, segs)?;
    let (schema_tag, other_tag) = if m.special == Special::OrBool {
        (2, 1)
    } else {
        (1, 2)
    };
    let (Some(si), Some(oi)) = (m.field_for_tag(schema_tag), m.field_for_tag(other_tag)) else {
        return Err(format!("{} lacks its fields", m.name));
    };
    let schema_vals: Entries<'a> = e.iter().filter(|x| x.0 == si).copied().collect();
    let other: Entries<'a> = e.iter().filter(|x| x.0 == oi).copied().collect();
    let schema_ty = match &m.fields[si].ty {
        Ty::Ptr(inner) => &**inner,
        t => t,
    };
    Ok(match m.special {
        Special::OrBool => {
            if !schema_vals.is_empty() {
                SpecialValue::Present(schema_ty, schema_vals)
            } else {
                let allows = matches!(other.last(), Some((_, WireVal::Varint(x))) if *x != 0);
                SpecialValue::Bool(allows)
            }
        }
        _ => {
            let Ty::Slice(inner) = &m.fields[oi].ty else {
                return Err(format!("{} lacks its list", m.name));
            };
            let len = count(inner, &other)?;
            if len > 0 {
                SpecialValue::Elements(inner, other, len)
            } else if !schema_vals.is_empty() {
                SpecialValue::Present(schema_ty, schema_vals)
            } else {
                SpecialValue::Null
            }
        }
    })
}
