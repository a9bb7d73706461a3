//! etcd's MVCC records as its backend stores them (`server/mvcc` of etcd): the `key`
//! bucket maps a revision to the `mvccpb.KeyValue` written at it.
//!
//! A revision key is 17 bytes: the main revision (8 bytes, big-endian), `_`, the sub
//! revision (8 bytes, big-endian); a deletion's key has a `t` appended (a tombstone),
//! and its value holds only the key. The `KeyValue` protobuf is decoded here by hand:
//! six fields, no protoc.

use bytes::Bytes;

/// Bytes of a revision key without the tombstone mark.
const REVISION_KEY: usize = 17;

/// A revision: the main revision of a transaction and the change's place in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision {
    /// The transaction's revision: what kube calls the resourceVersion.
    pub main: i64,
    /// The change's index within its transaction.
    pub sub: i64,
}

impl Revision {
    /// The `key` bucket's key of this revision (with the tombstone mark for a delete).
    pub fn to_key(self, tombstone: bool) -> Vec<u8> {
        let mut key = Vec::with_capacity(REVISION_KEY + 1);
        key.extend_from_slice(&self.main.to_be_bytes());
        key.push(b'_');
        key.extend_from_slice(&self.sub.to_be_bytes());
        if tombstone {
            key.push(b't');
        }
        key
    }

    /// The revision a `key` bucket key names and whether it is a tombstone; `None`
    /// when it is no revision key.
    pub fn from_key(key: &[u8]) -> Option<(Self, bool)> {
        let tombstone = match key.len() {
            REVISION_KEY => false,
            18 if key[REVISION_KEY] == b't' => true,
            _ => return None,
        };
        if key[8] != b'_' {
            return None;
        }
        let main = i64::from_be_bytes(key[..8].try_into().ok()?);
        let sub = i64::from_be_bytes(key[9..REVISION_KEY].try_into().ok()?);
        (main >= 0 && sub >= 0).then_some((Self { main, sub }, tombstone))
    }
}

/// A stored key-value, etcd's `mvccpb.KeyValue`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Bytes,
    /// The revision of the key's last creation.
    pub create_revision: i64,
    /// The revision of this change.
    pub mod_revision: i64,
    /// Changes to the key since its creation (1 at the creation).
    pub version: i64,
    /// The value.
    pub value: Bytes,
    /// The lease the key was written with (0 for none).
    pub lease: i64,
}

/// Decodes a `mvccpb.KeyValue`; fields it does not know are skipped, as protobuf does.
pub fn decode_key_value(bytes: &Bytes) -> Result<KeyValue, String> {
    let mut kv = KeyValue::default();
    each_field(bytes, |field, value| match (field, value) {
        (2, Field::Varint(n)) => kv.create_revision = n as i64,
        (3, Field::Varint(n)) => kv.mod_revision = n as i64,
        (4, Field::Varint(n)) => kv.version = n as i64,
        (6, Field::Varint(n)) => kv.lease = n as i64,
        (1, Field::Bytes(range)) => kv.key = bytes.slice(range),
        (5, Field::Bytes(range)) => kv.value = bytes.slice(range),
        _ => {}
    })?;
    if kv.key.is_empty() {
        return Err("no key".to_owned());
    }
    Ok(kv)
}

/// The key of a stored `mvccpb.KeyValue`, as [`decode_key_value`] reads it and with
/// the same errors, but without copying or decoding anything else: the other fields'
/// tags and lengths are read to step over them. A lookup that compares every record's
/// key with the one it wants reads each record this far only.
pub fn key_of(bytes: &[u8]) -> Result<&[u8], String> {
    // As the whole decode: a repeated key's last one counts, and an empty one is none.
    let mut key = 0..0;
    each_field(bytes, |field, value| {
        if let (1, Field::Bytes(range)) = (field, value) {
            key = range;
        }
    })?;
    if key.is_empty() {
        return Err("no key".to_owned());
    }
    Ok(&bytes[key])
}

/// A field's value: a number, or where its bytes are.
enum Field {
    Varint(u64),
    Bytes(std::ops::Range<usize>),
}

/// Calls `visit` with each field of a protobuf message, in order; fixed-width fields
/// are stepped over (`KeyValue` has none).
fn each_field(bytes: &[u8], mut visit: impl FnMut(u64, Field)) -> Result<(), String> {
    let mut at = 0;
    while at < bytes.len() {
        let tag = varint(bytes, &mut at)?;
        let (field, wire) = (tag >> 3, tag & 7);
        match wire {
            0 => visit(field, Field::Varint(varint(bytes, &mut at)?)),
            1 | 5 => {
                let width = if wire == 1 { 8 } else { 4 };
                at = at
                    .checked_add(width)
                    .filter(|end| *end <= bytes.len())
                    .ok_or_else(|| format!("field {field} runs past the end at byte {at}"))?;
            }
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).unwrap_or(usize::MAX);
                let end = at
                    .checked_add(len)
                    .filter(|end| *end <= bytes.len())
                    .ok_or_else(|| {
                        format!("field {field} of {len} bytes runs past the end at byte {at}")
                    })?;
                visit(field, Field::Bytes(at..end));
                at = end;
            }
            other => return Err(format!("wire type {other} of field {field} at byte {at}")),
        }
    }
    Ok(())
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let start = *at;
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let Some(byte) = bytes.get(*at) else {
            return Err(format!("a varint at byte {start} runs past the end"));
        };
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(format!("a varint at byte {start} is longer than 10 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_keys_round_trip() {
        let rev = Revision { main: 300, sub: 2 };
        assert_eq!(Revision::from_key(&rev.to_key(false)), Some((rev, false)));
        assert_eq!(Revision::from_key(&rev.to_key(true)), Some((rev, true)));
        assert_eq!(Revision::from_key(b"not a revision key"), None);
        let mut bad = rev.to_key(true);
        bad[17] = b'x';
        assert_eq!(Revision::from_key(&bad), None);
    }

    #[test]
    fn key_values_decode_and_bad_bytes_are_errors() {
        // key "/a", create 2, mod 5, version 3, value "v", lease 7, and an unknown
        // fixed64 field 9.
        let mut raw = vec![
            0x0a, 2, b'/', b'a', 0x10, 2, 0x18, 5, 0x20, 3, 0x2a, 1, b'v', 0x30, 7,
        ];
        raw.extend_from_slice(&[0x49, 1, 2, 3, 4, 5, 6, 7, 8]);
        let kv = decode_key_value(&Bytes::from(raw.clone())).unwrap();
        assert_eq!(&kv.key[..], b"/a");
        assert_eq!(
            (kv.create_revision, kv.mod_revision, kv.version, kv.lease),
            (2, 5, 3, 7)
        );
        assert_eq!(&kv.value[..], b"v");
        for cut in 0..raw.len() {
            // Every prefix either decodes (ends between fields) or is an error.
            let _ = decode_key_value(&Bytes::copy_from_slice(&raw[..cut]));
        }
        assert!(decode_key_value(&Bytes::from_static(&[0x0a, 200])).is_err());
        assert!(decode_key_value(&Bytes::from_static(&[0xff; 12])).is_err());
        assert!(decode_key_value(&Bytes::from_static(&[0x0b])).is_err());
    }

    #[test]
    fn the_key_alone_is_the_decoded_key() {
        let raw = [0x10, 2, 0x0a, 2, b'/', b'a', 0x2a, 1, b'v'];
        assert_eq!(key_of(&raw).unwrap(), b"/a");
        assert_eq!(
            &decode_key_value(&Bytes::copy_from_slice(&raw)).unwrap().key[..],
            key_of(&raw).unwrap()
        );
        assert!(key_of(&[0x10, 2, 0x2a, 1, b'v']).is_err(), "no key");
        assert!(key_of(&[0x0a, 9, b'/']).is_err(), "past the end");
        assert!(key_of(&[]).is_err());
    }
}

#[cfg(test)]
mod proptests {
    use super::*;

    proptest::proptest! {
        /// Arbitrary bytes decode or fail; a decoded key-value's fields lie inside them.
        #[test]
        fn any_bytes_decode_or_fail(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let bytes = Bytes::from(raw);
            if let Ok(kv) = decode_key_value(&bytes) {
                proptest::prop_assert!(kv.key.len() + kv.value.len() <= bytes.len());
            }
            // The key read alone is the decoded one whenever both succeed.
            if let (Ok(kv), Ok(key)) = (decode_key_value(&bytes), key_of(&bytes)) {
                proptest::prop_assert_eq!(&kv.key[..], key);
            }
            let _ = Revision::from_key(&bytes);
        }
    }
}
