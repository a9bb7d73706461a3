//! Go's scalar types as [`Kind`]s: `string` (Go's per-byte U+FFFD for invalid
//! UTF-8), `bool`, `int32` (cut to 32 bits, into an `i32` or the `i64` k8s-openapi
//! holds some in), `int64` and `float64`, each packed in a repeated field as Go's
//! decoding accepts.

use super::fields::{Kind, wrong_wire};
use super::{Cx, FieldError};
use crate::de::go_string;
use crate::wire::{WireVal, read_varint};

/// Go `string`.
pub(crate) struct GoStr;

impl Kind<String> for GoStr {
    #[inline]
    fn read(value: WireVal<'_>, _: &mut Cx<'_>) -> Result<Option<String>, FieldError> {
        match value {
            WireVal::Bytes(b) => Ok(Some(go_string(b).into_owned())),
            other => Err(wrong_wire(other)),
        }
    }
    fn zero() -> Option<String> {
        Some(String::new())
    }
    fn is_empty(v: &String) -> bool {
        v.is_empty()
    }
}

/// Go `bool`.
pub(crate) struct GoBool;

/// Go `int32`: the varint cut to 32 bits, as Go's decoding does; k8s-openapi holds
/// some as `i64`.
pub(crate) struct GoI32;

/// Go `int64`.
pub(crate) struct GoI64;

/// Each varint of a packed run.
fn varints(b: &[u8], mut each: impl FnMut(u64)) -> Result<(), FieldError> {
    let mut pos = 0;
    while pos < b.len() {
        each(read_varint(b, &mut pos).map_err(FieldError::new)?);
    }
    Ok(())
}

/// A Go type read from a varint (packed in a list) into `$out`, whose default is
/// the Go zero.
macro_rules! varint_kind {
    ($kind:ident => $out:ty, $convert:expr) => {
        impl Kind<$out> for $kind {
            #[inline]
            fn read(value: WireVal<'_>, _: &mut Cx<'_>) -> Result<Option<$out>, FieldError> {
                match value {
                    WireVal::Varint(x) => Ok(Some($convert(x))),
                    other => Err(wrong_wire(other)),
                }
            }
            fn zero() -> Option<$out> {
                Some(<$out>::default())
            }
            fn is_empty(v: &$out) -> bool {
                *v == <$out>::default()
            }
            fn packed(b: &[u8], out: &mut Vec<$out>) -> Option<Result<(), FieldError>> {
                Some(varints(b, |x| out.push($convert(x))))
            }
        }
    };
}

varint_kind!(GoBool => bool, |x: u64| x != 0);
varint_kind!(GoI32 => i32, |x: u64| x as i32);
varint_kind!(GoI32 => i64, |x: u64| i64::from(x as i32));
varint_kind!(GoI64 => i64, |x: u64| x as i64);

/// Go `float64`.
pub(crate) struct GoF64;

impl Kind<f64> for GoF64 {
    #[inline]
    fn read(value: WireVal<'_>, _: &mut Cx<'_>) -> Result<Option<f64>, FieldError> {
        match value {
            WireVal::Fixed64(x) => Ok(Some(f64::from_bits(x))),
            other => Err(wrong_wire(other)),
        }
    }
    fn zero() -> Option<f64> {
        Some(0.0)
    }
    fn is_empty(v: &f64) -> bool {
        *v == 0.0
    }
    fn packed(b: &[u8], out: &mut Vec<f64>) -> Option<Result<(), FieldError>> {
        if b.len() % 8 != 0 {
            return Some(Err(FieldError::new(
                "packed fixed64 length is not a multiple of 8",
            )));
        }
        for chunk in b.chunks_exact(8) {
            let mut a = [0u8; 8];
            a.copy_from_slice(chunk);
            out.push(f64::from_bits(u64::from_le_bytes(a)));
        }
        Some(Ok(()))
    }
}
