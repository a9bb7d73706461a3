//! kube's `EncryptedObject` (`pkg/storage/value/encrypt/envelope/kmsv2/v2/api.proto`):
//! what follows `k8s:enc:kms:v2:<provider>:` in etcd, with a hand-written protobuf
//! encoder and decoder (five fields do not justify a code generation step), kube's
//! validation (`ValidateEncryptedObject`) and its DEK cache key (`generateCacheKey`).
//!
//! Fields are written in field-number order, zero values omitted as proto3 does; map
//! entries are written key then value, sorted by key (Go writes them in map order, so
//! any order reads). Unknown fields are skipped on reading, as Go's decoder does.

use std::collections::BTreeMap;

use crate::{Result, TransformError};

/// The longest key id kube accepts (1 KiB).
pub const KEY_ID_MAX_SIZE: usize = 1024;
/// The longest encrypted DEK source kube accepts (1 KiB).
pub const ENCRYPTED_DEK_SOURCE_MAX_SIZE: usize = 1024;
/// The largest total size of annotation keys and values kube accepts (32 KiB).
pub const ANNOTATIONS_MAX_SIZE: usize = 32 * 1024;

/// How the plaintext of `encryptedDEKSource` gives the DEK (`EncryptedDEKSourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EncryptedDekSourceType {
    /// `AES_GCM_KEY` (0): the plaintext is the AES-GCM DEK itself (before kube 1.29).
    #[default]
    AesGcmKey,
    /// `HKDF_SHA256_XNONCE_AES_GCM_SEED` (1): the plaintext is a seed; each value's DEK
    /// is HKDF-SHA256 of it with the value's first 32 bytes as info (kube 1.29+).
    HkdfSha256XnonceAesGcmSeed,
}

impl EncryptedDekSourceType {
    /// The enum number on the wire.
    pub fn number(self) -> u32 {
        match self {
            Self::AesGcmKey => 0,
            Self::HkdfSha256XnonceAesGcmSeed => 1,
        }
    }

    fn from_number(n: u64) -> Result<Self> {
        match n {
            0 => Ok(Self::AesGcmKey),
            1 => Ok(Self::HkdfSha256XnonceAesGcmSeed),
            _ => Err(invalid(format!("unknown encryptedDEKSourceType: {n}"))),
        }
    }
}

/// A KMS v2 stored value, after its prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EncryptedObject {
    /// 1 `encryptedData`: the value sealed with the DEK.
    pub encrypted_data: Vec<u8>,
    /// 2 `keyID`: the plugin's key id that encrypted the DEK source.
    pub key_id: String,
    /// 3 `encryptedDEKSource`: the DEK source as the plugin encrypted it.
    pub encrypted_dek_source: Vec<u8>,
    /// 4 `annotations`: the plugin's metadata, given back to it on decrypt.
    pub annotations: BTreeMap<String, Vec<u8>>,
    /// 5 `encryptedDEKSourceType`.
    pub encrypted_dek_source_type: EncryptedDekSourceType,
}

fn invalid(message: String) -> TransformError {
    TransformError::Kms(message)
}

impl EncryptedObject {
    /// The protobuf encoding, after checking the object as kube does before writing.
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let mut out = Vec::with_capacity(
            self.encrypted_data.len() + self.key_id.len() + self.encrypted_dek_source.len() + 16,
        );
        put_bytes(&mut out, 1, &self.encrypted_data);
        put_bytes(&mut out, 2, self.key_id.as_bytes());
        put_bytes(&mut out, 3, &self.encrypted_dek_source);
        for (key, value) in &self.annotations {
            let mut entry = Vec::with_capacity(key.len() + value.len() + 4);
            put_len_field(&mut entry, 1, key.as_bytes());
            put_len_field(&mut entry, 2, value);
            put_len_field(&mut out, 4, &entry);
        }
        let source_type = self.encrypted_dek_source_type.number();
        if source_type != 0 {
            put_varint(&mut out, 5 << 3);
            put_varint(&mut out, u64::from(source_type));
        }
        Ok(out)
    }

    /// Decodes and validates a stored object.
    pub fn decode(data: &[u8]) -> Result<Self> {
        let mut o = Self::default();
        let mut r = Reader { data, pos: 0 };
        while !r.done() {
            let tag = r.varint()?;
            let (field, wire) = (tag >> 3, tag & 7);
            match (field, wire) {
                (1, 2) => o.encrypted_data = r.bytes()?.to_vec(),
                (2, 2) => o.key_id = utf8(r.bytes()?, "keyID")?,
                (3, 2) => o.encrypted_dek_source = r.bytes()?.to_vec(),
                (4, 2) => {
                    let (k, v) = map_entry(r.bytes()?)?;
                    o.annotations.insert(k, v);
                }
                (5, 0) => {
                    o.encrypted_dek_source_type = EncryptedDekSourceType::from_number(r.varint()?)?
                }
                (0, _) => return Err(invalid("proto: illegal tag 0".to_owned())),
                (_, _) => r.skip(wire)?,
            }
        }
        o.validate()?;
        Ok(o)
    }

    /// kube's `ValidateEncryptedObject`, with its messages.
    pub fn validate(&self) -> Result<()> {
        if self.encrypted_data.is_empty() {
            return Err(invalid("encrypted data is empty".to_owned()));
        }
        validate_encrypted_dek_source(&self.encrypted_dek_source)
            .map_err(|e| invalid(format!("failed to validate encrypted DEK source: {e}")))?;
        validate_key_id(&self.key_id)
            .map_err(|e| invalid(format!("failed to validate key id: {e}")))?;
        validate_annotations(&self.annotations)
            .map_err(|e| invalid(format!("failed to validate annotations: {e}")))?;
        Ok(())
    }

    /// kube's `generateCacheKey`: the source type, the encrypted DEK source, the key id
    /// and the sorted annotations, length-prefixed as `cryptobyte` writes them.
    pub fn cache_key(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.encrypted_dek_source.len() + self.key_id.len() + 8);
        b.extend_from_slice(&self.encrypted_dek_source_type.number().to_be_bytes());
        put_u16_prefixed(&mut b, &self.encrypted_dek_source);
        put_u16_prefixed(&mut b, self.key_id.as_bytes());
        if !self.annotations.is_empty() {
            let n = u32::try_from(self.annotations.len()).unwrap_or(u32::MAX);
            b.extend_from_slice(&n.to_be_bytes());
            for (k, v) in &self.annotations {
                put_u16_prefixed(&mut b, k.as_bytes());
                put_u16_prefixed(&mut b, v);
            }
        }
        b
    }
}

/// kube's `ValidateKeyID`: not empty, at most 1 KiB.
pub fn validate_key_id(key_id: &str) -> std::result::Result<(), String> {
    if key_id.is_empty() {
        return Err("keyID is empty".to_owned());
    }
    if key_id.len() > KEY_ID_MAX_SIZE {
        return Err(format!(
            "keyID is {} bytes, which exceeds the max size of {KEY_ID_MAX_SIZE}",
            key_id.len()
        ));
    }
    Ok(())
}

fn validate_encrypted_dek_source(source: &[u8]) -> std::result::Result<(), String> {
    if source.is_empty() {
        return Err("encrypted DEK source is empty".to_owned());
    }
    if source.len() > ENCRYPTED_DEK_SOURCE_MAX_SIZE {
        return Err(format!(
            "encrypted DEK source is {} bytes, which exceeds the max size of {ENCRYPTED_DEK_SOURCE_MAX_SIZE}",
            source.len()
        ));
    }
    Ok(())
}

fn validate_annotations(
    annotations: &BTreeMap<String, Vec<u8>>,
) -> std::result::Result<(), String> {
    let mut errors = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations {
        if !is_fully_qualified_domain_name(k) {
            errors.push(format!(
                "annotations: Invalid value: {k:?}: should be a domain with at least two segments separated by dots"
            ));
        }
        total = total.saturating_add(k.len()).saturating_add(v.len());
    }
    if total > ANNOTATIONS_MAX_SIZE {
        errors.push(format!(
            "total size of annotations is {total}, which exceeds the max size of {ANNOTATIONS_MAX_SIZE}"
        ));
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// apimachinery's `IsFullyQualifiedDomainName`: at least two labels, a DNS-1123
/// subdomain of at most 253 characters (a trailing dot is allowed).
fn is_fully_qualified_domain_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 253 || name.split('.').count() < 2 {
        return false;
    }
    name.split('.').all(|label| {
        let bytes = label.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= 63
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes.first().is_some_and(|b| b.is_ascii_alphanumeric())
            && bytes.last().is_some_and(|b| b.is_ascii_alphanumeric())
    })
}

pub use apistore_storage::kms_observer::key_id_hash;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_len_field(out: &mut Vec<u8>, field: u64, data: &[u8]) {
    put_varint(out, (field << 3) | 2);
    put_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// A proto3 scalar bytes or string field: omitted when empty.
fn put_bytes(out: &mut Vec<u8>, field: u64, data: &[u8]) {
    if !data.is_empty() {
        put_len_field(out, field, data);
    }
}

fn put_u16_prefixed(out: &mut Vec<u8>, data: &[u8]) {
    // Every field here is validated to at most 32 KiB; cap rather than panic.
    let n = u16::try_from(data.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(&data[..usize::from(n)]);
}

fn utf8(data: &[u8], field: &str) -> Result<String> {
    String::from_utf8(data.to_vec())
        .map_err(|_| invalid(format!("proto: field {field} contains invalid UTF-8")))
}

fn map_entry(data: &[u8]) -> Result<(String, Vec<u8>)> {
    let mut r = Reader { data, pos: 0 };
    let (mut key, mut value) = (String::new(), Vec::new());
    while !r.done() {
        let tag = r.varint()?;
        match (tag >> 3, tag & 7) {
            (1, 2) => key = utf8(r.bytes()?, "annotations key")?,
            (2, 2) => value = r.bytes()?.to_vec(),
            (_, wire) => r.skip(wire)?,
        }
    }
    Ok((key, value))
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(invalid("unexpected EOF".to_owned()));
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(invalid("proto: integer overflow".to_owned()))
    }

    fn bytes(&mut self) -> Result<&'a [u8]> {
        let len = self.varint()?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| self.pos.checked_add(len))
            .filter(|end| *end <= self.data.len())
            .ok_or_else(|| invalid("unexpected EOF".to_owned()))?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn skip(&mut self, wire: u64) -> Result<()> {
        let n = match wire {
            0 => return self.varint().map(drop),
            1 => 8,
            2 => return self.bytes().map(drop),
            5 => 4,
            _ => return Err(invalid(format!("proto: illegal wireType {wire}"))),
        };
        let end = self.pos.saturating_add(n);
        if end > self.data.len() {
            return Err(invalid("unexpected EOF".to_owned()));
        }
        self.pos = end;
        Ok(())
    }
}
