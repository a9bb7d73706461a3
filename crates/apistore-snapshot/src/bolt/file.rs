//! The file: its meta pages, its length (without the sha256 `etcdctl snapshot save`
//! appends), and positioned reads of its pages through a small cache.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::bolt::meta::{MAGIC, META_BYTES, Meta};
use crate::bolt::page::{Origin, PAGE_HEADER, Page, read_u32};
use crate::error::{Result, SnapshotError};

/// Pages kept in memory between reads: 1024 pages, 4 MiB at bbolt's usual page size.
const CACHED_PAGES: usize = 1024;
/// Bytes a read fetches at once when it continues the previous one (64 pages of
/// 4 KiB): a scan of a bucket reads its leaf pages mostly in file order, and one
/// system call for 64 pages costs little more than one for a page (`analyze` of a
/// 719 MiB snapshot: 1.22 s reading a page at a time, 0.94 s with this). A walk from
/// the last key back reads them mostly against file order, and fetches the bytes
/// before the previous read instead.
const READ_AHEAD: u64 = 256 * 1024;
/// Reads ahead kept at once (2 MiB): a walk over the newest part of etcd's file moves
/// between a few regions of it (copy-on-write leaves recent leaf pages out of order),
/// and with one window kept it read the same bytes again and again (1,753 MiB read to
/// walk a 714 MiB file backwards, 1,195 MiB forwards).
const WINDOWS: usize = 8;
/// Bytes of the hash etcd appends to a snapshot.
const HASH_BYTES: u64 = 32;
/// Page sizes tried for the second meta page when the first is unreadable.
const PAGE_SIZES: [u32; 8] = [4096, 512, 1024, 2048, 8192, 16384, 32768, 65536];

/// An open bbolt file, read with positioned reads.
#[derive(Debug)]
pub struct BoltFile {
    file: File,
    path: PathBuf,
    meta: Meta,
    /// Bytes of bbolt data: the file without a trailing snapshot hash.
    data_len: u64,
    hash: Option<[u8; 32]>,
    cache: Mutex<HashMap<u64, Page>>,
    read_ahead: Mutex<ReadAhead>,
}

/// The bytes read ahead of (or behind) the pages read last, and where the last read
/// began and ended.
#[derive(Debug, Default)]
struct ReadAhead {
    windows: Vec<Window>,
    /// Reads so far: a window's last use on this clock tells which to reuse.
    clock: u64,
    /// Where the last read began.
    last: u64,
    /// Where the last read ended.
    next: u64,
}

/// Bytes of the file from `start`, read at once.
#[derive(Debug)]
struct Window {
    start: u64,
    bytes: Vec<u8>,
    used: u64,
}

impl Window {
    fn holds(&self, offset: u64, end: u64) -> bool {
        offset >= self.start && end <= self.start.saturating_add(self.bytes.len() as u64)
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_read(file, buf, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

impl BoltFile {
    /// Opens `path` and reads its meta pages: the valid one with the higher transaction
    /// id is current. A file whose meta page counts more pages than it holds is
    /// truncated; a trailing 32 bytes past the last page are the snapshot's sha256.
    pub fn open(path: &Path) -> Result<Self> {
        let io = |source| SnapshotError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut this = Self {
            file,
            path: path.to_owned(),
            meta: Meta {
                page: 0,
                page_size: 4096,
                root: 0,
                freelist: 0,
                high_water: 0,
                txid: 0,
            },
            data_len: len,
            hash: None,
            cache: Mutex::new(HashMap::new()),
            read_ahead: Mutex::new(ReadAhead::default()),
        };
        this.meta = this.choose_meta(len)?;
        let page_size = u64::from(this.meta.page_size);
        if len % page_size == HASH_BYTES {
            this.data_len = len - HASH_BYTES;
            let mut hash = [0; 32];
            this.read(&mut hash, this.data_len, "the snapshot hash")?;
            this.hash = Some(hash);
        }
        let needed = this.meta.high_water.saturating_mul(page_size);
        if needed > this.data_len {
            return Err(SnapshotError::Truncated {
                path: this.path.clone(),
                what: format!(
                    "the {} pages of {page_size} bytes meta page {} counts",
                    this.meta.high_water, this.meta.page
                ),
                offset: 0,
                end: needed,
                len: this.data_len,
            });
        }
        Ok(this)
    }

    fn choose_meta(&self, len: u64) -> Result<Meta> {
        if len == 0 {
            return Err(self.not_bbolt("the file is empty".to_owned()));
        }
        if len < META_BYTES as u64 {
            let mut head = vec![0; len as usize];
            self.read(&mut head, 0, "meta page 0")?;
            if read_u32(&head, PAGE_HEADER) != Some(MAGIC) {
                return Err(self.not_bbolt(format!(
                    "{len} bytes, too short for a meta page and without bbolt's magic"
                )));
            }
            return Err(SnapshotError::Truncated {
                path: self.path.clone(),
                what: "meta page 0".to_owned(),
                offset: 0,
                end: META_BYTES as u64,
                len,
            });
        }
        let mut first = [0; META_BYTES];
        self.read(&mut first, 0, "meta page 0")?;
        let meta0 = Meta::parse(0, &first);
        let sizes: Vec<u32> = match &meta0 {
            Ok(meta) => vec![meta.page_size],
            Err(_) => PAGE_SIZES.to_vec(),
        };
        let mut meta1 = Err("the file ends before it".to_owned());
        for size in sizes {
            let at = u64::from(size);
            if at + META_BYTES as u64 > len {
                continue;
            }
            let mut second = [0; META_BYTES];
            self.read(&mut second, at, "meta page 1")?;
            meta1 = Meta::parse(1, &second);
            if meta1.is_ok() {
                break;
            }
        }
        match (meta0, meta1) {
            (Ok(a), Ok(b)) => Ok(if b.txid > a.txid { b } else { a }),
            (Ok(meta), Err(_)) | (Err(_), Ok(meta)) => Ok(meta),
            (Err(reason0), Err(reason1)) => {
                if reason0.starts_with("magic") {
                    Err(self.not_bbolt(format!("meta page 0 has {reason0}")))
                } else {
                    Err(SnapshotError::CorruptPage {
                        path: self.path.clone(),
                        page: 0,
                        offset: 0,
                        problem: format!(
                            "neither meta page is valid: page 0: {reason0}; page 1: {reason1}"
                        ),
                    })
                }
            }
        }
    }

    fn not_bbolt(&self, reason: String) -> SnapshotError {
        SnapshotError::NotBbolt {
            path: self.path.clone(),
            reason,
        }
    }

    fn read(&self, buf: &mut [u8], offset: u64, what: &str) -> Result<()> {
        self.read_described(buf, offset, || what.to_owned())
    }

    /// [`read`](Self::read), with what was read described only if it fails (a scan
    /// reads every page, and formatting each one's name cost more than 1% of it).
    fn read_described(
        &self,
        buf: &mut [u8],
        offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<()> {
        read_exact_at(&self.file, buf, offset).map_err(|source| {
            if source.kind() == std::io::ErrorKind::UnexpectedEof {
                SnapshotError::Truncated {
                    path: self.path.clone(),
                    what: what(),
                    offset,
                    end: offset.saturating_add(buf.len() as u64),
                    len: self.data_len,
                }
            } else {
                SnapshotError::Io {
                    path: self.path.clone(),
                    source,
                }
            }
        })
    }

    /// Appends `len` bytes of pages at `offset` to `out`: from the bytes read ahead
    /// when they hold them; with a read of [`READ_AHEAD`] bytes when the read
    /// continues near where the previous one ended, or of the [`READ_AHEAD`] bytes
    /// before where the previous one began when it lies just before that (a walk
    /// backwards: the bytes up to the previous read are this page's overflow, if it
    /// has any); otherwise as asked (a lookup jumps about the file, and reading ahead
    /// of each jump would only copy more). Bytes from the read-ahead are copied once,
    /// into room not zeroed first.
    fn read_pages(
        &self,
        out: &mut Vec<u8>,
        len: usize,
        offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<()> {
        let end = offset.saturating_add(len as u64);
        let mut ahead = self.read_ahead.lock().unwrap_or_else(|e| e.into_inner());
        ahead.clock += 1;
        let clock = ahead.clock;
        if let Some(held) = ahead.windows.iter_mut().find(|w| w.holds(offset, end)) {
            held.used = clock;
            let from = (offset - held.start) as usize;
            out.extend_from_slice(&held.bytes[from..from + len]);
            ahead.last = offset;
            ahead.next = end;
            return Ok(());
        }
        let forward = offset >= ahead.next && offset - ahead.next < READ_AHEAD;
        let backward = end <= ahead.last && ahead.last - offset <= READ_AHEAD;
        let window = if forward {
            offset..offset.saturating_add(READ_AHEAD).min(self.data_len)
        } else if backward {
            ahead.last.saturating_sub(READ_AHEAD)..ahead.last
        } else {
            offset..end
        };
        ahead.last = offset;
        ahead.next = end;
        // Saturating: a window past the data's end (never asked for by `page`, which
        // checks ids against the high water mark) is read as asked, and fails there.
        if window.end.saturating_sub(window.start) <= len as u64 {
            drop(ahead);
            let at = out.len();
            out.resize(at + len, 0);
            return self.read_described(&mut out[at..], offset, what);
        }
        // The least recently used window's room, once all are taken.
        let mut bytes = if ahead.windows.len() < WINDOWS {
            Vec::new()
        } else {
            let oldest = ahead
                .windows
                .iter()
                .enumerate()
                .min_by_key(|(_, window)| window.used)
                .map_or(0, |(i, _)| i);
            ahead.windows.swap_remove(oldest).bytes
        };
        bytes.resize((window.end - window.start) as usize, 0);
        self.read_described(&mut bytes, window.start, what)?;
        let from = (offset - window.start) as usize;
        out.extend_from_slice(&bytes[from..from + len]);
        ahead.windows.push(Window {
            start: window.start,
            bytes,
            used: clock,
        });
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current meta page.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Bytes of bbolt data (the file without a trailing snapshot hash).
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// Whether the file ends with the sha256 `etcdctl snapshot save` appends.
    pub fn has_hash(&self) -> bool {
        self.hash.is_some()
    }

    /// Checks the appended sha256 against the data, reading the file once in 1 MiB
    /// pieces. `Ok(false)` when there is no hash (a member's `db` file has none).
    pub fn verify_hash(&self) -> Result<bool> {
        let Some(stored) = self.hash else {
            return Ok(false);
        };
        let mut hasher = Sha256::new();
        let mut chunk = vec![0; 1 << 20];
        let mut offset = 0u64;
        while offset < self.data_len {
            let n = (self.data_len - offset).min(chunk.len() as u64) as usize;
            self.read(&mut chunk[..n], offset, "the data the snapshot hash covers")?;
            hasher.update(&chunk[..n]);
            offset += n as u64;
        }
        let computed: [u8; 32] = hasher.finalize().into();
        if computed != stored {
            return Err(SnapshotError::HashMismatch {
                path: self.path.clone(),
                stored: hex(&stored),
                computed: hex(&computed),
            });
        }
        Ok(true)
    }

    /// An error about bytes at `offset` of page `page`.
    pub(crate) fn corrupt(&self, page: u64, offset: u64, problem: String) -> SnapshotError {
        SnapshotError::CorruptPage {
            path: self.path.clone(),
            page,
            offset,
            problem,
        }
    }

    /// Reads page `id` (with its overflow), named in errors as referenced from `from`.
    /// The id must lie below the high water mark and the page say it is that page.
    pub(crate) fn page(&self, id: u64, from: Origin) -> Result<Page> {
        if let Some(page) = self.cached(id) {
            return Ok(page);
        }
        let high_water = self.meta.high_water;
        if id < 2 || id >= high_water {
            return Err(self.corrupt(
                from.page,
                from.offset,
                format!("it refers to page {id}, outside the pages in use 2..{high_water}"),
            ));
        }
        let page_size = u64::from(self.meta.page_size);
        let offset = id * page_size;
        let mut bytes = Vec::with_capacity(self.meta.page_size as usize);
        self.read_pages(&mut bytes, self.meta.page_size as usize, offset, || {
            format!("page {id}")
        })?;
        let origin = Origin { page: id, offset };
        let overflow = read_u32(&bytes, 12).unwrap_or_default();
        if overflow > 0 {
            let last = id.saturating_add(u64::from(overflow));
            if last >= high_water {
                return Err(self.corrupt(
                    id,
                    offset + 12,
                    format!(
                        "its overflow of {overflow} pages runs past the pages in use ..{high_water}"
                    ),
                ));
            }
            let total = (u64::from(overflow) + 1) * page_size;
            bytes.reserve_exact((total - page_size) as usize);
            self.read_pages(
                &mut bytes,
                (total - page_size) as usize,
                offset + page_size,
                || format!("the {overflow} overflow pages of page {id}"),
            )?;
        }
        let whole = bytes.len();
        let Some(page) = Page::new(origin, Bytes::from(bytes)) else {
            return Err(self.corrupt(id, offset, "no room for a page header".to_owned()));
        };
        if page.header_id() != id {
            return Err(self.corrupt(
                id,
                offset,
                format!(
                    "the page at this offset says it is page {}",
                    page.header_id()
                ),
            ));
        }
        if whole as u64 == page_size {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() >= CACHED_PAGES {
                cache.clear();
            }
            cache.insert(id, page.clone());
        }
        Ok(page)
    }

    fn cached(&self, id: u64) -> Option<Page> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(&id).cloned()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
