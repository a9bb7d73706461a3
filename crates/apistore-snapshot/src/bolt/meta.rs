//! The meta page: where the tree starts, how large a page is, and which transaction
//! wrote it (bbolt's `common.Meta`). Its checksum is FNV-64a over the fields before it.

use crate::bolt::page::{META_PAGE, PAGE_HEADER, read_u32, read_u64};

/// bbolt's magic number, the first field of a meta page.
pub(crate) const MAGIC: u32 = 0xED0C_DAED;
/// The only data file version bbolt has written.
const VERSION: u32 = 2;
/// Bytes of the meta fields covered by the checksum.
const CHECKSUMMED: usize = 56;
/// Bytes of a meta page's header and fields.
pub(crate) const META_BYTES: usize = PAGE_HEADER + CHECKSUMMED + 8;

/// The current meta page of a bbolt file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Which meta page (0 or 1) this is.
    pub page: u64,
    /// Bytes in a page.
    pub page_size: u32,
    /// The root page of the root bucket, whose entries are the top-level buckets.
    pub root: u64,
    /// The freelist page (not read).
    pub freelist: u64,
    /// The high water mark: every page in use has a lower id.
    pub high_water: u64,
    /// The transaction that wrote this meta page.
    pub txid: u64,
}

/// FNV-64a, bbolt's meta checksum.
pub(crate) fn fnv64a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

impl Meta {
    /// The meta page in `bytes` (read at meta page `page`), or why it is not one.
    pub(crate) fn parse(page: u64, bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < META_BYTES {
            return Err(format!(
                "{} bytes, a meta page needs {META_BYTES}",
                bytes.len()
            ));
        }
        let field = |at: usize| read_u32(bytes, PAGE_HEADER + at).unwrap_or_default();
        let wide = |at: usize| read_u64(bytes, PAGE_HEADER + at).unwrap_or_default();
        let magic = field(0);
        if magic != MAGIC {
            return Err(format!("magic {magic:#010x}, not bbolt's {MAGIC:#010x}"));
        }
        let flags = u16::from_le_bytes([bytes[8], bytes[9]]);
        if flags != META_PAGE {
            return Err(format!(
                "page flags {flags:#x}, not a meta page's {META_PAGE:#x}"
            ));
        }
        let version = field(4);
        if version != VERSION {
            return Err(format!("data file version {version}, not {VERSION}"));
        }
        let stored = wide(CHECKSUMMED);
        let computed = fnv64a(&bytes[PAGE_HEADER..PAGE_HEADER + CHECKSUMMED]);
        if stored != computed {
            return Err(format!(
                "checksum {stored:#018x}, computed {computed:#018x}"
            ));
        }
        let page_size = field(8);
        if !page_size.is_power_of_two() || !(512..=1 << 20).contains(&page_size) {
            return Err(format!(
                "page size {page_size} is not a power of two in 512..=1MiB"
            ));
        }
        let meta = Self {
            page,
            page_size,
            root: wide(16),
            freelist: wide(32),
            high_water: wide(40),
            txid: wide(48),
        };
        if meta.high_water < 3 || meta.root < 2 || meta.root >= meta.high_water {
            return Err(format!(
                "root page {} outside the pages in use 2..{}",
                meta.root, meta.high_water
            ));
        }
        Ok(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv64a_matches_the_reference_vectors() {
        assert_eq!(fnv64a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv64a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
