//! Buckets: B+trees of sorted keys, found by name in their parent (bbolt's `Bucket`
//! and `Cursor`, read-only). A bucket's value in its parent is its root page id and a
//! sequence; a root of 0 means the bucket is small and its one leaf page follows inline.

use std::cmp::Ordering;
use std::collections::HashSet;

use bytes::Bytes;

use crate::bolt::file::BoltFile;
use crate::bolt::page::{BRANCH_PAGE, BUCKET_LEAF, LEAF_PAGE, Origin, Page, read_u64};
use crate::error::{Result, SnapshotError};

/// Levels a tree may have before a walk calls it a cycle: a bbolt tree of 2^64 keys is
/// far shallower.
const MAX_DEPTH: usize = 64;
/// Bytes of a bucket's header in its parent's value: root page id and sequence.
const BUCKET_HEADER: usize = 16;

/// One key of a bucket.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key.
    pub key: Bytes,
    /// The value (a nested bucket's header, for a bucket).
    pub value: Bytes,
    /// Whether the value is a nested bucket.
    pub is_bucket: bool,
    /// The leaf page holding the entry (the page holding an inline bucket's page).
    pub page: u64,
    /// The file offset of the value.
    pub offset: u64,
}

/// A bucket of a [`BoltFile`]: its root page, or its inline page.
#[derive(Debug, Clone)]
pub struct Bucket {
    root: Root,
}

#[derive(Debug, Clone)]
enum Root {
    /// A root page, and where it is referred to from.
    Page(u64, Origin),
    Inline(Page),
}

impl Bucket {
    /// The root bucket of the file, whose keys are the top-level buckets.
    pub fn root(file: &BoltFile) -> Self {
        let meta = file.meta();
        let from = Origin {
            page: meta.page,
            offset: meta.page * u64::from(meta.page_size),
        };
        Self {
            root: Root::Page(meta.root, from),
        }
    }

    fn open(file: &BoltFile, entry: &Entry) -> Result<Self> {
        let corrupt = |problem: String| file.corrupt(entry.page, entry.offset, problem);
        if entry.value.len() < BUCKET_HEADER {
            return Err(corrupt(format!(
                "the bucket {:?} has a value of {} bytes, less than a bucket header",
                String::from_utf8_lossy(&entry.key),
                entry.value.len()
            )));
        }
        let root = read_u64(&entry.value, 0).unwrap_or_default();
        let origin = Origin {
            page: entry.page,
            offset: entry.offset,
        };
        if root != 0 {
            return Ok(Self {
                root: Root::Page(root, origin),
            });
        }
        let inline = Origin {
            page: entry.page,
            offset: entry.offset + BUCKET_HEADER as u64,
        };
        let page = Page::new(inline, entry.value.slice(BUCKET_HEADER..)).ok_or_else(|| {
            corrupt("an inline bucket's page is shorter than a page header".to_owned())
        })?;
        if page.flags != LEAF_PAGE {
            return Err(corrupt(format!(
                "an inline bucket's page has flags {:#x}, not a leaf page's",
                page.flags
            )));
        }
        Ok(Self {
            root: Root::Inline(page),
        })
    }

    fn root_page(&self, file: &BoltFile) -> Result<Page> {
        match &self.root {
            Root::Page(id, from) => file.page(*id, *from),
            Root::Inline(page) => Ok(page.clone()),
        }
    }

    /// The nested bucket `name`, if there is one (a plain key of that name is not one).
    pub fn bucket(&self, file: &BoltFile, name: &[u8]) -> Result<Option<Self>> {
        match self.get(file, name)? {
            Some(entry) if entry.is_bucket => Self::open(file, &entry).map(Some),
            _ => Ok(None),
        }
    }

    /// The entry of `key`, if there is one.
    pub fn get(&self, file: &BoltFile, key: &[u8]) -> Result<Option<Entry>> {
        let mut page = self.root_page(file)?;
        for _ in 0..MAX_DEPTH {
            match page.flags {
                LEAF_PAGE => {
                    let found = search(page.count, |i| {
                        let element = page.leaf(i).map_err(|e| located(file, &page, e))?;
                        Ok(element.key.as_ref().cmp(key))
                    })?;
                    let Ok(index) = found else {
                        return Ok(None);
                    };
                    return entry(file, &page, index).map(Some);
                }
                BRANCH_PAGE => {
                    if page.count == 0 {
                        return Err(empty_branch(file, &page));
                    }
                    let found = search(page.count, |i| {
                        let (first, _) = page.branch(i).map_err(|e| located(file, &page, e))?;
                        Ok(first.as_ref().cmp(key))
                    })?;
                    let index = match found {
                        Ok(index) => index,
                        Err(insert) => insert.saturating_sub(1),
                    };
                    page = child(file, &page, index)?;
                }
                flags => return Err(not_a_node(file, &page, flags)),
            }
        }
        Err(too_deep(file, &page))
    }

    /// Calls `visit` with every entry in key order until it returns `false`. Every
    /// page is entered once at most: a page met twice is a cycle, and an error.
    pub fn for_each(
        &self,
        file: &BoltFile,
        visit: impl FnMut(Entry) -> Result<bool>,
    ) -> Result<()> {
        self.walk(file, Direction::Forward, visit)
    }

    /// [`Self::for_each`] from the last key back to the first: the newest records of
    /// etcd's `key` bucket first, whose keys are revisions.
    pub fn for_each_rev(
        &self,
        file: &BoltFile,
        visit: impl FnMut(Entry) -> Result<bool>,
    ) -> Result<()> {
        self.walk(file, Direction::Backward, visit)
    }

    fn walk(
        &self,
        file: &BoltFile,
        direction: Direction,
        mut visit: impl FnMut(Entry) -> Result<bool>,
    ) -> Result<()> {
        let root = self.root_page(file)?;
        let mut visited = HashSet::new();
        if let Root::Page(id, _) = self.root {
            visited.insert(id);
        }
        // Each page on the stack with how many of its elements have been taken.
        let mut stack: Vec<(Page, u16)> = vec![(root, 0)];
        while let Some((page, taken)) = stack.pop() {
            match page.flags {
                LEAF_PAGE => {
                    for n in 0..page.count {
                        let index = direction.index(page.count, n);
                        if !visit(entry(file, &page, index)?)? {
                            return Ok(());
                        }
                    }
                }
                BRANCH_PAGE => {
                    if page.count == 0 {
                        return Err(empty_branch(file, &page));
                    }
                    if taken >= page.count {
                        continue;
                    }
                    let child = child(file, &page, direction.index(page.count, taken))?;
                    if !visited.insert(child.origin.page) {
                        return Err(file.corrupt(
                            page.origin.page,
                            page.origin.offset,
                            format!(
                                "it refers to page {} a second time: a cycle",
                                child.origin.page
                            ),
                        ));
                    }
                    stack.push((page, taken + 1));
                    if stack.len() > MAX_DEPTH {
                        return Err(too_deep(file, &child));
                    }
                    stack.push((child, 0));
                }
                flags => return Err(not_a_node(file, &page, flags)),
            }
        }
        Ok(())
    }
}

/// Which way a walk goes through the keys.
#[derive(Debug, Clone, Copy)]
enum Direction {
    Forward,
    Backward,
}

impl Direction {
    /// The index of the `n`th element taken from a page of `count`.
    fn index(self, count: u16, n: u16) -> u16 {
        match self {
            Self::Forward => n,
            Self::Backward => count - 1 - n,
        }
    }
}

/// Binary search over `count` sorted elements: `Ok(index)` of an equal one, else
/// `Err(index)` where one would go.
fn search(
    count: u16,
    mut compare: impl FnMut(u16) -> Result<Ordering>,
) -> Result<Result<u16, u16>> {
    let (mut low, mut high) = (0u16, count);
    while low < high {
        let mid = low + (high - low) / 2;
        match compare(mid)? {
            Ordering::Less => low = mid + 1,
            Ordering::Greater => high = mid,
            Ordering::Equal => return Ok(Ok(mid)),
        }
    }
    Ok(Err(low))
}

fn entry(file: &BoltFile, page: &Page, index: u16) -> Result<Entry> {
    let element = page.leaf(index).map_err(|e| located(file, page, e))?;
    Ok(Entry {
        is_bucket: element.flags & BUCKET_LEAF != 0,
        key: element.key,
        value: element.value,
        page: page.origin.page,
        offset: element.value_offset,
    })
}

fn child(file: &BoltFile, page: &Page, index: u16) -> Result<Page> {
    let (_, id) = page.branch(index).map_err(|e| located(file, page, e))?;
    let from = Origin {
        page: page.origin.page,
        offset: page.offset_of(16 + usize::from(index) * 16),
    };
    let child = file.page(id, from)?;
    if child.flags != LEAF_PAGE && child.flags != BRANCH_PAGE {
        return Err(not_a_node(file, &child, child.flags));
    }
    Ok(child)
}

fn located(file: &BoltFile, page: &Page, (offset, problem): (u64, String)) -> SnapshotError {
    file.corrupt(page.origin.page, offset, problem)
}

fn empty_branch(file: &BoltFile, page: &Page) -> SnapshotError {
    file.corrupt(
        page.origin.page,
        page.origin.offset,
        "a branch page with no elements".to_owned(),
    )
}

fn not_a_node(file: &BoltFile, page: &Page, flags: u16) -> SnapshotError {
    file.corrupt(
        page.origin.page,
        page.origin.offset + 8,
        format!("page flags {flags:#x}: not a branch or leaf page where the tree needs one"),
    )
}

fn too_deep(file: &BoltFile, page: &Page) -> SnapshotError {
    file.corrupt(
        page.origin.page,
        page.origin.offset,
        format!("the tree is deeper than {MAX_DEPTH} levels here: a cycle"),
    )
}
