//! The Go types k8s-openapi writes by hand: `[]byte` (`ByteString`),
//! `resource.Quantity`, `metav1.Time` and `MicroTime`, `intstr.IntOrString`, each read straight from its protobuf with
//! the rules `special.rs` gives the JSON path. The raw-JSON ones (`RawExtension`,
//! `FieldsV1`, apiextensions' `JSON` and `JSONSchemaPropsOr*`, and the structs
//! k8s-openapi keeps as a `serde_json::Value`) are read through the serde path
//! ([`serde_one`] and friends): they hold JSON either way.

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;

use super::fields::{Holds, Keyed, Kind, Many, wrong_wire};
use super::{Cx, FieldError};
use crate::de::go_string;
use crate::quantity;
use crate::time::ZERO_TIME_UNIX;
use crate::walk::Segs;
use crate::wire::{Fields, WireVal};

/// Go `[]byte`: `null` when absent, left out under `omitempty` when empty.
pub(crate) struct GoBytes;

impl Kind<ByteString> for GoBytes {
    #[inline]
    fn read(value: WireVal<'_>, _: &mut Cx<'_>) -> Result<Option<ByteString>, FieldError> {
        match value {
            WireVal::Bytes(b) => Ok(Some(ByteString(b.to_vec()))),
            other => Err(wrong_wire(other)),
        }
    }
    fn zero() -> Option<ByteString> {
        None
    }
    fn map_zero() -> Option<ByteString> {
        Some(ByteString(Vec::new()))
    }
    fn is_empty(v: &ByteString) -> bool {
        v.0.is_empty()
    }
}

/// The fields of a special type's occurrence.
fn message_fields(value: WireVal<'_>) -> Result<Fields<'_>, FieldError> {
    match value {
        WireVal::Bytes(b) => Ok(Fields::new(b)),
        other => Err(wrong_wire(other)),
    }
}

/// `resource.Quantity`: its string (the last field 1), canonical as Go's `String()`
/// writes it.
pub(crate) struct GoQuantity;

impl Kind<Quantity> for GoQuantity {
    #[inline]
    fn read(value: WireVal<'_>, cx: &mut Cx<'_>) -> Result<Option<Quantity>, FieldError> {
        Self::merge(None, value, cx)
    }
    /// An occurrence without a string keeps the one before (Go's `Unmarshal` only
    /// parses the strings it sees).
    #[inline]
    fn merge(
        current: Option<&Quantity>,
        value: WireVal<'_>,
        _: &mut Cx<'_>,
    ) -> Result<Option<Quantity>, FieldError> {
        let mut text: Option<&[u8]> = None;
        for item in message_fields(value)? {
            match item.map_err(FieldError::new)? {
                (1, WireVal::Bytes(b)) => text = Some(b),
                (1, _) => return Err(FieldError::new("quantity string has the wrong wire type")),
                _ => {}
            }
        }
        let Some(text) = text else {
            return Ok(Some(match current {
                Some(q) if !q.0.is_empty() => q.clone(),
                _ => Quantity("0".to_owned()),
            }));
        };
        let s = std::str::from_utf8(text).map_err(|_| FieldError::new("quantity is not UTF-8"))?;
        let canonical = quantity::canonical_cached(s).map_err(FieldError::new)?;
        Ok(Some(Quantity(canonical.into_owned())))
    }
    fn zero() -> Option<Quantity> {
        Some(Quantity("0".to_owned()))
    }
}

/// A timestamp's seconds and nanoseconds; an empty message is Go's zero time (its
/// `Unmarshal` of no bytes leaves the zero value).
fn timestamp(value: WireVal<'_>) -> Result<(i64, i64), FieldError> {
    if matches!(value, WireVal::Bytes([])) {
        return Ok((ZERO_TIME_UNIX, 0));
    }
    let (mut secs, mut nanos) = (0i64, 0i64);
    for item in message_fields(value)? {
        match item.map_err(FieldError::new)? {
            (1, WireVal::Varint(x)) => secs = x as i64,
            (2, WireVal::Varint(x)) => nanos = i64::from(x as i32),
            (1 | 2, _) => return Err(FieldError::new("timestamp field has the wrong wire type")),
            _ => {}
        }
    }
    Ok((secs, nanos))
}

/// The instant, or `None` for Go's zero time (which its JSON writes as `null`).
fn instant(secs: i64, nanos: i64) -> Result<Option<Timestamp>, FieldError> {
    if secs == ZERO_TIME_UNIX && nanos == 0 {
        return Ok(None);
    }
    Timestamp::new(secs, nanos as i32)
        .map(Some)
        .map_err(|e| FieldError::new(format!("timestamp out of range: {e}")))
}

/// `metav1.Time`: whole seconds (its JSON drops the rest).
pub(crate) struct GoTime;

impl Kind<Time> for GoTime {
    #[inline]
    fn read(value: WireVal<'_>, _: &mut Cx<'_>) -> Result<Option<Time>, FieldError> {
        let (secs, _) = timestamp(value)?;
        Ok(instant(secs, 0)?.map(Time))
    }
    fn zero() -> Option<Time> {
        None
    }
}

/// `metav1.MicroTime`: cut toward zero to microseconds, a negative remainder carried
/// into the seconds, as Go's `Truncate` and `time.Unix` do.
pub(crate) struct GoMicroTime;

impl Kind<MicroTime> for GoMicroTime {
    #[inline]
    fn read(value: WireVal<'_>, _: &mut Cx<'_>) -> Result<Option<MicroTime>, FieldError> {
        let (secs, nanos) = timestamp(value)?;
        let nanos = nanos - nanos % 1000;
        let secs = secs
            .checked_add(nanos.div_euclid(1_000_000_000))
            .ok_or_else(|| FieldError::new("timestamp out of range"))?;
        Ok(instant(secs, nanos.rem_euclid(1_000_000_000))?.map(MicroTime))
    }
    fn zero() -> Option<MicroTime> {
        None
    }
}

/// `intstr.IntOrString`: the string when its type says so, the number otherwise.
pub(crate) struct GoIntOrString;

impl Kind<IntOrString> for GoIntOrString {
    #[inline]
    fn read(value: WireVal<'_>, cx: &mut Cx<'_>) -> Result<Option<IntOrString>, FieldError> {
        Self::merge(None, value, cx)
    }
    /// Go's `Unmarshal` sets the fields an occurrence has and keeps the others, so a
    /// later occurrence merges into the value before it (as far as the enum keeps it:
    /// the number behind a string is not kept).
    #[inline]
    fn merge(
        current: Option<&IntOrString>,
        value: WireVal<'_>,
        _: &mut Cx<'_>,
    ) -> Result<Option<IntOrString>, FieldError> {
        let (mut ty, mut int, mut text): (u64, i32, std::borrow::Cow<'_, str>) = match current {
            None | Some(IntOrString::Int(_)) => (0, 0, "".into()),
            Some(IntOrString::String(s)) => (1, 0, s.as_str().into()),
        };
        if let Some(IntOrString::Int(i)) = current {
            int = *i;
        }
        for item in message_fields(value)? {
            match item.map_err(FieldError::new)? {
                (1, WireVal::Varint(x)) => ty = x,
                (2, WireVal::Varint(x)) => int = x as i32,
                (3, WireVal::Bytes(b)) => text = go_string(b),
                (1..=3, other) => return Err(wrong_wire(other)),
                _ => {}
            }
        }
        match ty {
            0 => Ok(Some(IntOrString::Int(int))),
            1 => Ok(Some(IntOrString::String(text.into_owned()))),
            _ => Err(FieldError::new("impossible IntOrString.Type")),
        }
    }
    fn zero() -> Option<IntOrString> {
        Some(IntOrString::Int(0))
    }
}

/// A value of Go type `go_type` (from `segs`, its occurrences) through the serde
/// path (`de/`), as the JSON path presents it: `T` may be an `Option`, `None` for
/// `null`.
fn through_serde<T: DeserializeOwned>(
    go_type: &str,
    segs: Segs<'_>,
    cx: &mut Cx<'_>,
) -> Result<T, FieldError> {
    let Some(&id) = cx.schema.by_name.get(go_type) else {
        return Err(FieldError::new(format!("the schema has no type {go_type}")));
    };
    crate::de::deserialize_message::<T>(cx.schema, cx.kind, "", id, segs)
        .map_err(FieldError::from_protobuf)
}

/// The segments of one occurrence.
fn one_segment(value: WireVal<'_>) -> Result<Segs<'_>, FieldError> {
    match value {
        WireVal::Bytes(b) => Ok(Segs::One(b)),
        other => Err(wrong_wire(other)),
    }
}

/// A single raw-JSON (or Value-held) field's occurrence, through the serde path.
pub(crate) fn serde_one<T: DeserializeOwned, S: Holds<T>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
    go_type: &str,
) -> Result<(), FieldError> {
    match through_serde::<Option<T>>(go_type, one_segment(value)?, cx)? {
        Some(v) => slot.put(v),
        None => slot.clear(),
    }
    Ok(())
}

/// Such a field absent (not a pointer): what Go's JSON has for its zero value.
pub(crate) fn serde_zero<T: DeserializeOwned, S: Holds<T>>(
    slot: &mut S,
    cx: &mut Cx<'_>,
    go_type: &str,
) -> Result<(), FieldError> {
    if let Some(v) = through_serde::<Option<T>>(go_type, Segs::None, cx)? {
        slot.put(v);
    }
    Ok(())
}

/// One element of a list of such values (a `null` one is the value `T` reads from
/// `null`, as serde_json would give).
pub(crate) fn list_serde<T: DeserializeOwned, S: Many<T>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
    go_type: &str,
) -> Result<(), FieldError> {
    let list = slot.list();
    let v =
        through_serde::<T>(go_type, one_segment(value)?, cx).map_err(|e| e.index(list.len()))?;
    list.push(v);
    Ok(())
}

/// One entry of a Go map of such values.
pub(crate) fn map_serde<T: DeserializeOwned, S: Keyed<T>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
    go_type: &str,
) -> Result<(), FieldError> {
    let WireVal::Bytes(raw) = value else {
        return Err(FieldError::new("map entry is not length-delimited"));
    };
    let (mut key, mut val): (&[u8], Segs<'_>) = (b"", Segs::None);
    for item in Fields::new(raw) {
        match item.map_err(FieldError::new)? {
            (1, WireVal::Bytes(k)) => key = k,
            (2, WireVal::Bytes(v)) => val = Segs::One(v),
            (1 | 2, other) => return Err(wrong_wire(other)),
            _ => {}
        }
    }
    let key = go_string(key).into_owned();
    let v = through_serde::<T>(go_type, val, cx).map_err(|e| e.key(key.clone()))?;
    slot.map().insert(key, v);
    Ok(())
}
