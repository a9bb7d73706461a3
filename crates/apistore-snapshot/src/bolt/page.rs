//! One page as read: its header and its elements (bbolt's `common.Page`,
//! `branchPageElement` and `leafPageElement`). Integers are little-endian, as bbolt
//! writes them on every platform etcd runs on.
//!
//! An element's `pos` counts from the element itself, so a key or value can lie
//! anywhere in the page or its overflow; every one is checked against the page's bytes.

use bytes::Bytes;

/// Bytes of a page header: id (8), flags (2), count (2), overflow (4).
pub(crate) const PAGE_HEADER: usize = 16;
/// Bytes of a branch or leaf element.
const ELEMENT: usize = 16;
/// A branch page's flags.
pub(crate) const BRANCH_PAGE: u16 = 0x01;
/// A leaf page's flags.
pub(crate) const LEAF_PAGE: u16 = 0x02;
/// A meta page's flags.
pub(crate) const META_PAGE: u16 = 0x04;
/// A leaf element whose value is a bucket.
pub(crate) const BUCKET_LEAF: u32 = 0x01;

/// A little-endian `u32` at `at`, if the bytes hold one.
pub(crate) fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let raw = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(raw.try_into().ok()?))
}

/// A little-endian `u64` at `at`, if the bytes hold one.
pub(crate) fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let raw = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(raw.try_into().ok()?))
}

/// Where a page's bytes came from, for errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Origin {
    /// The page id; for an inline page, the page holding it.
    pub(crate) page: u64,
    /// The file offset of the page's first byte.
    pub(crate) offset: u64,
}

/// A branch or leaf page (or an inline bucket's page) with its overflow.
#[derive(Debug, Clone)]
pub(crate) struct Page {
    pub(crate) origin: Origin,
    pub(crate) flags: u16,
    pub(crate) count: u16,
    bytes: Bytes,
}

/// One leaf element.
#[derive(Debug, Clone)]
pub(crate) struct LeafElement {
    pub(crate) flags: u32,
    pub(crate) key: Bytes,
    pub(crate) value: Bytes,
    /// The file offset of the value.
    pub(crate) value_offset: u64,
}

impl Page {
    /// The page in `bytes` (header first); `None` when they hold no header.
    pub(crate) fn new(origin: Origin, bytes: Bytes) -> Option<Self> {
        let header = bytes.get(..PAGE_HEADER)?;
        Some(Self {
            origin,
            flags: u16::from_le_bytes([header[8], header[9]]),
            count: u16::from_le_bytes([header[10], header[11]]),
            bytes,
        })
    }

    /// The id the page's header gives itself.
    pub(crate) fn header_id(&self) -> u64 {
        read_u64(&self.bytes, 0).unwrap_or(u64::MAX)
    }

    /// The file offset of byte `at` of the page.
    pub(crate) fn offset_of(&self, at: usize) -> u64 {
        self.origin.offset.saturating_add(at as u64)
    }

    /// `len` bytes at `pos` from element `index`'s address, or why not.
    fn slice(&self, element: usize, pos: u32, len: u32) -> Result<(Bytes, usize), String> {
        let start = element
            .checked_add(pos as usize)
            .filter(|start| *start <= self.bytes.len());
        let end = start.and_then(|start| start.checked_add(len as usize));
        match (start, end) {
            (Some(start), Some(end)) if end <= self.bytes.len() => {
                Ok((self.bytes.slice(start..end), start))
            }
            _ => Err(format!(
                "an element points at bytes {pos}+{len} from byte {element}, past the page's {} bytes",
                self.bytes.len()
            )),
        }
    }

    /// The address of element `index`, or why the page cannot hold it.
    fn element(&self, index: u16) -> Result<usize, (u64, String)> {
        let at = PAGE_HEADER + usize::from(index) * ELEMENT;
        if at + ELEMENT > self.bytes.len() {
            return Err((
                self.offset_of(PAGE_HEADER),
                format!(
                    "{} elements do not fit in the page's {} bytes",
                    self.count,
                    self.bytes.len()
                ),
            ));
        }
        Ok(at)
    }

    /// Branch element `index`: its key and child page.
    pub(crate) fn branch(&self, index: u16) -> Result<(Bytes, u64), (u64, String)> {
        let at = self.element(index)?;
        let pos = read_u32(&self.bytes, at).unwrap_or_default();
        let ksize = read_u32(&self.bytes, at + 4).unwrap_or_default();
        let child = read_u64(&self.bytes, at + 8).unwrap_or_default();
        let (key, _) = self
            .slice(at, pos, ksize)
            .map_err(|problem| (self.offset_of(at), problem))?;
        Ok((key, child))
    }

    /// Leaf element `index`.
    pub(crate) fn leaf(&self, index: u16) -> Result<LeafElement, (u64, String)> {
        let at = self.element(index)?;
        let flags = read_u32(&self.bytes, at).unwrap_or_default();
        let pos = read_u32(&self.bytes, at + 4).unwrap_or_default();
        let ksize = read_u32(&self.bytes, at + 8).unwrap_or_default();
        let vsize = read_u32(&self.bytes, at + 12).unwrap_or_default();
        let whole = ksize.checked_add(vsize).ok_or_else(|| {
            (
                self.offset_of(at),
                "key and value sizes overflow".to_owned(),
            )
        })?;
        let (both, start) = self
            .slice(at, pos, whole)
            .map_err(|problem| (self.offset_of(at), problem))?;
        let key = both.slice(..ksize as usize);
        let value = both.slice(ksize as usize..);
        Ok(LeafElement {
            flags,
            key,
            value,
            value_offset: self.offset_of(start + ksize as usize),
        })
    }
}
