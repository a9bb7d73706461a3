//! Test support: bbolt files built page by page, to read back and to break.

// Test support: a failed step must fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::bolt::meta::{MAGIC, fnv64a};
use crate::bolt::page::{BRANCH_PAGE, BUCKET_LEAF, LEAF_PAGE, META_PAGE, PAGE_HEADER};

/// A bbolt file under construction: pages 0 and 1 are the metas, page 2 an empty
/// freelist; pages appended after.
pub(crate) struct TestBolt {
    pub(crate) page_size: usize,
    pub(crate) data: Vec<u8>,
}

/// A leaf entry: a plain value, or a bucket (its header and inline page, or root).
#[derive(Clone)]
pub(crate) enum Value<'a> {
    Plain(&'a [u8]),
    Bucket(Vec<u8>),
}

impl TestBolt {
    pub(crate) fn new(page_size: usize) -> Self {
        let mut data = vec![0; page_size * 3];
        let freelist = &mut data[page_size * 2..];
        freelist[..8].copy_from_slice(&2u64.to_le_bytes());
        freelist[8..10].copy_from_slice(&0x10u16.to_le_bytes());
        Self { page_size, data }
    }

    fn next_id(&self) -> u64 {
        (self.data.len() / self.page_size) as u64
    }

    fn append(&mut self, mut page: Vec<u8>) -> u64 {
        let id = self.next_id();
        let pages = page.len().div_ceil(self.page_size).max(1);
        page.resize(pages * self.page_size, 0);
        page[..8].copy_from_slice(&id.to_le_bytes());
        page[12..16].copy_from_slice(&((pages - 1) as u32).to_le_bytes());
        self.data.extend_from_slice(&page);
        id
    }

    /// Appends a leaf page of sorted entries; returns its id.
    pub(crate) fn leaf(&mut self, entries: &[(&[u8], Value<'_>)]) -> u64 {
        self.append(leaf_bytes(entries))
    }

    /// Appends a branch page of (first key, child) pairs; returns its id.
    pub(crate) fn branch(&mut self, children: &[(&[u8], u64)]) -> u64 {
        let mut page = vec![0; PAGE_HEADER + children.len() * 16];
        page[8..10].copy_from_slice(&BRANCH_PAGE.to_le_bytes());
        page[10..12].copy_from_slice(&(children.len() as u16).to_le_bytes());
        for (i, (key, child)) in children.iter().enumerate() {
            let at = PAGE_HEADER + i * 16;
            let pos = (page.len() - at) as u32;
            page[at..at + 4].copy_from_slice(&pos.to_le_bytes());
            page[at + 4..at + 8].copy_from_slice(&(key.len() as u32).to_le_bytes());
            page[at + 8..at + 16].copy_from_slice(&child.to_le_bytes());
            page.extend_from_slice(key);
        }
        self.append(page)
    }

    /// The file, with both metas pointing at `root` (meta 1 newer, by `txid`).
    pub(crate) fn finish(mut self, root: u64) -> Vec<u8> {
        let high_water = self.next_id();
        for (page, txid) in [(0u64, 4u64), (1, 5)] {
            let at = page as usize * self.page_size;
            let mut meta = vec![0; PAGE_HEADER + 64];
            meta[..8].copy_from_slice(&page.to_le_bytes());
            meta[8..10].copy_from_slice(&META_PAGE.to_le_bytes());
            let fields = &mut meta[PAGE_HEADER..];
            fields[..4].copy_from_slice(&MAGIC.to_le_bytes());
            fields[4..8].copy_from_slice(&2u32.to_le_bytes());
            fields[8..12].copy_from_slice(&(self.page_size as u32).to_le_bytes());
            fields[16..24].copy_from_slice(&root.to_le_bytes());
            fields[32..40].copy_from_slice(&2u64.to_le_bytes());
            fields[40..48].copy_from_slice(&high_water.to_le_bytes());
            fields[48..56].copy_from_slice(&txid.to_le_bytes());
            let sum = fnv64a(&fields[..56]);
            fields[56..64].copy_from_slice(&sum.to_le_bytes());
            self.data[at..at + meta.len()].copy_from_slice(&meta);
        }
        self.data
    }
}

/// A leaf page's bytes (header id and overflow left for [`TestBolt::append`]).
pub(crate) fn leaf_bytes(entries: &[(&[u8], Value<'_>)]) -> Vec<u8> {
    let mut page = vec![0; PAGE_HEADER + entries.len() * 16];
    page[8..10].copy_from_slice(&LEAF_PAGE.to_le_bytes());
    page[10..12].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    for (i, (key, value)) in entries.iter().enumerate() {
        let (flags, value): (u32, &[u8]) = match value {
            Value::Plain(value) => (0, value),
            Value::Bucket(header) => (BUCKET_LEAF, header),
        };
        let at = PAGE_HEADER + i * 16;
        let pos = (page.len() - at) as u32;
        page[at..at + 4].copy_from_slice(&flags.to_le_bytes());
        page[at + 4..at + 8].copy_from_slice(&pos.to_le_bytes());
        page[at + 8..at + 12].copy_from_slice(&(key.len() as u32).to_le_bytes());
        page[at + 12..at + 16].copy_from_slice(&(value.len() as u32).to_le_bytes());
        page.extend_from_slice(key);
        page.extend_from_slice(value);
    }
    page
}

/// A bucket value pointing at a root page.
pub(crate) fn bucket_at(root: u64) -> Vec<u8> {
    let mut value = root.to_le_bytes().to_vec();
    value.extend_from_slice(&[0; 8]);
    value
}

/// An inline bucket value holding `entries`.
pub(crate) fn inline_bucket(entries: &[(&[u8], Value<'_>)]) -> Vec<u8> {
    let mut value = vec![0; 16];
    value.extend_from_slice(&leaf_bytes(entries));
    value
}
