//! The `k8s\0` + runtime.Unknown envelope, as kube's protobuf serializer writes it
//! (`runtime.Unknown.NestedMarshalTo`): typeMeta {apiVersion, kind}, raw, then the
//! always-written, always-empty contentEncoding and contentType.

use crate::error::ProtobufError;
use crate::wire::{Fields, WireVal, put_bytes, put_key, put_varint};

/// The four bytes in front of every protobuf value kube-apiserver stores.
pub const PROTOBUF_MAGIC: [u8; 4] = *b"k8s\0";

/// The parts of an envelope.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Envelope<'a> {
    pub(crate) api_version: &'a [u8],
    pub(crate) kind: &'a [u8],
    pub(crate) raw: &'a [u8],
}

/// Splits stored bytes into their envelope parts. A fault after the typeMeta was
/// read names the kind in it.
pub(crate) fn parse(stored: &[u8]) -> Result<Envelope<'_>, ProtobufError> {
    let body = stored
        .strip_prefix(&PROTOBUF_MAGIC[..])
        .ok_or(ProtobufError::NotProtobuf)?;
    let mut env = Envelope {
        api_version: b"",
        kind: b"",
        raw: b"",
    };
    let mut type_meta_read = false;
    let bad = |env: &Envelope<'_>, read: bool, reason: String| {
        let text =
            |b: &[u8]| (read && !b.is_empty()).then(|| String::from_utf8_lossy(b).into_owned());
        ProtobufError::Envelope {
            api_version: text(env.api_version),
            kind: text(env.kind),
            reason,
        }
    };
    for item in Fields::new(body) {
        match item.map_err(|e| bad(&env, type_meta_read, e))? {
            (1, WireVal::Bytes(tm)) => {
                for f in Fields::new(tm) {
                    match f.map_err(|e| bad(&env, type_meta_read, e))? {
                        (1, WireVal::Bytes(v)) => env.api_version = v,
                        (2, WireVal::Bytes(v)) => env.kind = v,
                        (1 | 2, _) => {
                            return Err(bad(
                                &env,
                                type_meta_read,
                                "typeMeta field has the wrong wire type".into(),
                            ));
                        }
                        _ => {}
                    }
                }
                type_meta_read = true;
            }
            (2, WireVal::Bytes(raw)) => env.raw = raw,
            (3 | 4, WireVal::Bytes(_)) => {}
            (1..=4, _) => {
                return Err(bad(
                    &env,
                    type_meta_read,
                    "field has the wrong wire type".into(),
                ));
            }
            _ => {}
        }
    }
    Ok(env)
}

/// Writes `k8s\0` and the envelope around an object's protobuf.
pub(crate) fn write(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut tm = Vec::with_capacity(api_version.len() + kind.len() + 4);
    put_bytes(&mut tm, 1, api_version.as_bytes());
    put_bytes(&mut tm, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(PROTOBUF_MAGIC.len() + tm.len() + raw.len() + 20);
    out.extend_from_slice(&PROTOBUF_MAGIC);
    put_bytes(&mut out, 1, &tm);
    put_key(&mut out, 2, 2);
    put_varint(&mut out, raw.len() as u64);
    out.extend_from_slice(raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}
