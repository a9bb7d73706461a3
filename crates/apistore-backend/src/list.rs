//! GetList: where a list starts (its continue token and the revision it reads at), the
//! loop over its pages (selection, the limit, doubling pages when selectors filter),
//! and how it ends (the next continue token and the list's metadata); and the 410s of
//! a list whose revision compaction took.
//!
//! Follows `GetList`, `resolveGetListRev` and `interpretListError` of `etcd3/store.go`
//! in k8s.io/apiserver v0.31.1. A backend owns its page reads (the requests, where the
//! next page starts, what a revision error is) and hands each page's key-values to
//! [`ListPages::take_page`].

use std::borrow::Cow;

use apistore_storage::{
    ApiObject, CorruptListItem, ListMeta, ListOptions, MAX_CORRUPT_OBJECTS_IN_LIST, ObjectList,
    ResourceVersionMatch, Result, SelectionPredicate, StorageError, StoreReadErrors, Versioner,
};
use apistore_versioning::{ApiObjectVersioner, continue_token};
use bytes::Bytes;

use crate::object::{DecodeErrors, ObjectLayers};
use crate::read_ahead::PageReader;

mod off_runtime;

pub use off_runtime::OFF_RUNTIME_VALUES;

/// The largest page asked for when selectors filter most objects out.
pub const MAX_LIMIT: i64 = 10_000;

/// The message of a 410 for a list that was not continued.
pub const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";
/// The message of a 410 for a continued list when no token can go on.
pub const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";
/// The message of a 410 for a continued list that comes with a token to go on at the
/// latest revision.
pub const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Where a list starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListStart {
    /// The key the caller's continue token names (a recursive list with a token only).
    pub continue_key: Option<String>,
    /// The revision every page reads at; 0 for the latest (then the first page's).
    pub rev: i64,
}

/// Decodes the continue token of a recursive list under `key_prefix` (a bad token is a
/// bad request) and resolves the revision the list reads at.
pub fn list_start(key_prefix: &str, options: &ListOptions) -> Result<ListStart> {
    let predicate = &options.predicate;
    let mut continue_key = None;
    let mut continue_rv = 0;
    if options.recursive && !predicate.continue_token.is_empty() {
        let (decoded_key, decoded_rv) =
            continue_token::decode(&predicate.continue_token, key_prefix).map_err(|err| {
                StorageError::bad_request(key_prefix, format!("invalid continue token: {err}"))
            })?;
        continue_key = Some(decoded_key);
        continue_rv = decoded_rv;
    }
    let rev = resolve_rev(
        continue_key.as_deref().unwrap_or_default(),
        continue_rv,
        options,
        key_prefix,
    )?;
    Ok(ListStart { continue_key, rev })
}

/// The revision a list reads at: 0 for "latest". kube-apiserver's `resolveGetListRev`.
fn resolve_rev(
    continue_key: &str,
    continue_rv: i64,
    options: &ListOptions,
    key: &str,
) -> Result<i64> {
    if !continue_key.is_empty() {
        if !options.resource_version.is_empty() && options.resource_version != "0" {
            return Err(StorageError::bad_request(
                key,
                "specifying resource version is not allowed when using continue",
            ));
        }
        // A positive revision continues a consistent list; −1 (after compaction)
        // continues at the latest revision.
        return Ok(continue_rv.max(0));
    }
    if options.resource_version.is_empty() {
        return Ok(0);
    }
    let parsed =
        apistore_versioning::parse_resource_version(&options.resource_version).map_err(|err| {
            StorageError::bad_request(key, format!("invalid resource version: {err}"))
        })?;
    let parsed = i64::try_from(parsed).unwrap_or(i64::MAX);
    Ok(match options.resource_version_match {
        // Checked against the answer's revision once the store has answered.
        ResourceVersionMatch::NotOlderThan => 0,
        ResourceVersionMatch::Exact => parsed,
        ResourceVersionMatch::Unset => {
            if options.recursive && options.predicate.limit > 0 && parsed > 0 {
                parsed
            } else {
                0
            }
        }
    })
}

/// The 410 Expired of a paged read whose revision was compacted away: a plain one for
/// a list that continues nothing (`continue_from` is `None`), else one with a token to
/// go on from `continue_from` at the latest revision (or without, when no token can
/// name that key).
pub fn compacted_list_error(key: &str, continue_from: Option<&[u8]>) -> StorageError {
    let Some(continue_from) = continue_from else {
        return StorageError::Expired {
            key: key.to_owned(),
            message: LIST_EXPIRED.to_owned(),
            continue_token: None,
        };
    };
    let (message, continue_token) = match continue_token::encode_start_key(continue_from, -1, key) {
        Ok(token) => (INCONSISTENT_CONTINUE, Some(token)),
        Err(_) => (CONTINUE_EXPIRED, None),
    };
    StorageError::Expired {
        key: key.to_owned(),
        message: message.to_owned(),
        continue_token,
    }
}

/// A stored key as a backend's pages hold it: etcd's bytes or the memory store's text.
pub trait ListKey: Default + AsRef<[u8]> {
    /// The key as text, for errors and as the transformer's authenticated data:
    /// borrowed when it is UTF-8 (every key a store writes), so no copy per item.
    fn text(&self) -> Cow<'_, str>;
}

impl ListKey for Vec<u8> {
    fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self)
    }
}

impl ListKey for String {
    fn text(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

/// One list in progress: the items selected so far, the page size to ask for next,
/// where the last page ended, and the counts of kube-apiserver's
/// `apiserver_storage_list_*` metrics.
#[derive(Debug)]
pub struct ListPages<'p, T, K> {
    predicate: &'p SelectionPredicate,
    limit: i64,
    items: Vec<T>,
    /// Items selected and already handed out by [`ListPages::take_items`].
    handed_out: usize,
    last_key: K,
    has_more: bool,
    last_count: i64,
    fetched: usize,
    evaluated: usize,
    returned: usize,
    /// The corrupt objects met so far, when the store goes past them
    /// ([`ObjectLayers::unsafe_malformed_object_deletion`]), and why it stopped early.
    unreadable: Option<Box<StoreReadErrors>>,
}

impl<T, K> ListPages<'_, T, K> {
    /// Key-values read, evaluated against the predicate, and returned so far.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.fetched, self.evaluated, self.returned)
    }
}

impl<'p, T, K> ListPages<'p, T, K>
where
    T: ApiObject + Default + 'static,
    K: ListKey,
{
    /// A list selecting with `predicate` (and paged by its limit, when positive).
    pub fn new(predicate: &'p SelectionPredicate) -> Self {
        Self {
            predicate,
            limit: predicate.limit,
            items: Vec::new(),
            handed_out: 0,
            last_key: K::default(),
            has_more: false,
            last_count: 0,
            fetched: 0,
            evaluated: 0,
            returned: 0,
            unreadable: None,
        }
    }

    /// Whether the list stopped reading after corrupt objects (the hundredth, or another
    /// error after them): a backend reads no more pages or chunks, and [`Self::finish`]
    /// fails naming them.
    pub fn stopped(&self) -> bool {
        self.unreadable
            .as_ref()
            .is_some_and(|unreadable| unreadable.truncated || unreadable.aborted.is_some())
    }

    /// A value under `key` failed to read with `err`. When the store goes past corrupt
    /// objects (kube's `AllowUnsafeMalformedObjectDeletion`), a corrupt one is kept to
    /// name at the end, up to [`MAX_CORRUPT_OBJECTS_IN_LIST`]; otherwise the list fails
    /// here, as before kube 1.37. Another error after corrupt objects stops the list;
    /// [`Self::finish`] names both.
    fn unreadable<E>(
        &mut self,
        layers: &ObjectLayers<T, E>,
        key: &K,
        err: StorageError,
    ) -> Result<()> {
        let Some(group_resource) = layers.unsafe_malformed_object_deletion() else {
            return Err(err);
        };
        let corrupt = err.is_corrupt_object();
        let unreadable = match (&mut self.unreadable, corrupt) {
            (None, false) => return Err(err),
            (Some(unreadable), false) => {
                unreadable.aborted = Some(err.to_string());
                return Ok(());
            }
            (unreadable, true) => unreadable.get_or_insert_with(|| {
                Box::new(StoreReadErrors {
                    group_resource: group_resource.to_string(),
                    items: Vec::new(),
                    truncated: false,
                    aborted: None,
                })
            }),
        };
        unreadable.items.push(CorruptListItem {
            key: key.text().into_owned(),
            error: err,
        });
        unreadable.truncated = unreadable.items.len() >= MAX_CORRUPT_OBJECTS_IN_LIST;
        Ok(())
    }

    pub(crate) fn paging(&self) -> bool {
        self.predicate.limit > 0
    }

    /// How many keys to ask for in the next page; 0 for all of them.
    pub fn page_limit(&self) -> i64 {
        if self.paging() { self.limit } else { 0 }
    }

    /// The last key taken, where a next page starts after.
    pub fn last_key(&self) -> &K {
        &self.last_key
    }

    /// Hands out the items selected so far, for a caller that consumes a list page by
    /// page instead of holding it whole; they still count as selected (towards the
    /// limit) and as returned.
    pub fn take_items(&mut self) -> Vec<T> {
        self.handed_out += self.items.len();
        std::mem::take(&mut self.items)
    }

    /// Items selected so far, handed out or not.
    fn selected(&self) -> usize {
        self.handed_out + self.items.len()
    }

    /// Takes one page, in key order, of `(key, stored value, mod revision)`, `more` and
    /// `count` as the store answered it (keys left after the page, keys in the range
    /// from the page's start). Returns whether the list is complete; if not, the next
    /// page is read after [`Self::last_key`], in a page twice as large (up to
    /// [`MAX_LIMIT`]) since selectors dropped objects.
    ///
    /// A large page's values are read back on several threads at once, up to
    /// [`ObjectLayers::read_threads`], and taken in key order as if read one by one.
    pub fn take_page<E, I>(
        &mut self,
        layers: &ObjectLayers<T, E>,
        kvs: I,
        more: bool,
        count: i64,
    ) -> Result<bool>
    where
        T: Send,
        K: Send,
        E: DecodeErrors + Sync,
        I: ExactSizeIterator<Item = (K, Bytes, i64)>,
    {
        let page = PageReader::new(layers, self.predicate, kvs);
        self.take_from(layers, page, more, count)
    }

    /// Takes the values of `page`, none of them handed out yet, into the list (see
    /// [`Self::take_page`]).
    pub(crate) fn take_from<E, I>(
        &mut self,
        layers: &ObjectLayers<T, E>,
        mut page: PageReader<'_, T, E, K, I>,
        more: bool,
        count: i64,
    ) -> Result<bool>
    where
        T: Send,
        K: Send,
        E: DecodeErrors + Sync,
        I: ExactSizeIterator<Item = (K, Bytes, i64)>,
    {
        let predicate = self.predicate;
        let paging = self.paging();
        self.fetched += page.len();
        if predicate.is_empty() {
            self.items.reserve(page.len());
        }
        let mut has_more = more;
        while !page.is_empty() {
            if self.stopped() {
                return Ok(true);
            }
            let wanted = if paging {
                let left = predicate.limit - self.selected() as i64;
                if left <= 0 {
                    has_more = true;
                    break;
                }
                usize::try_from(left).unwrap_or(usize::MAX)
            } else {
                usize::MAX
            };
            let Some((key, read)) = page.next(wanted) else {
                break;
            };
            let item = match read {
                Ok(Some(item)) => item,
                // Judged on its stored bytes, and not selected.
                Ok(None) => {
                    self.evaluated += 1;
                    self.last_key = key;
                    continue;
                }
                Err(unread) => {
                    self.unreadable(layers, &key, layers.report_unread(unread))?;
                    // As kube, the next page starts after a corrupt object too.
                    self.last_key = key;
                    continue;
                }
            };
            if predicate.matches(&item) {
                self.items.push(item);
            }
            self.evaluated += 1;
            self.last_key = key;
        }
        if self.stopped() || !has_more || !paging || self.selected() as i64 >= predicate.limit {
            self.has_more = has_more;
            self.last_count = count;
            return Ok(true);
        }
        if self.limit < MAX_LIMIT {
            self.limit = (self.limit * 2).min(MAX_LIMIT);
        }
        Ok(false)
    }

    /// The list read at `with_rev` under `key_prefix`: its items, and the continue token
    /// and remaining item count when more remain.
    pub fn finish(
        &mut self,
        key_prefix: &str,
        with_rev: i64,
        versioner: &ApiObjectVersioner,
    ) -> Result<ObjectList<T>> {
        self.returned = self.selected();
        if let Some(errors) = self.unreadable.take() {
            return Err(StorageError::StoreRead {
                key: key_prefix.to_owned(),
                errors,
            });
        }
        let next = continue_token::prepare(
            &self.last_key,
            key_prefix,
            with_rev,
            self.last_count,
            self.has_more,
            self.predicate,
        )
        .map_err(|err| StorageError::Internal {
            key: key_prefix.to_owned(),
            message: err.to_string(),
            source: Some(Box::new(err)),
        })?;
        let (continue_value, remaining) = match next {
            Some(page) => (page.continue_token, page.remaining_item_count),
            None => (String::new(), None),
        };
        let mut metadata = ListMeta::default();
        versioner
            .update_list(
                &mut metadata,
                with_rev.max(0).unsigned_abs(),
                continue_value,
                remaining,
            )
            .map_err(|err| err.with_key(key_prefix.to_owned()))?;
        Ok(ObjectList::new(std::mem::take(&mut self.items), metadata))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Name, continue key, continue rv, rv, match, recursive, limit, and the expected
    /// revision or error text.
    type Row<'a> = (
        &'a str,
        &'a str,
        i64,
        &'a str,
        ResourceVersionMatch,
        bool,
        i64,
        Result<i64, &'a str>,
    );

    // The resolution table of TestResolveGetListRev, minus the etcd round trip.
    #[test]
    fn resolve_get_list_rev_follows_the_reference_table() {
        let cases: Vec<Row<'_>> = vec![
            (
                "continue with rv",
                "k",
                100,
                "200",
                ResourceVersionMatch::Unset,
                true,
                0,
                Err("specifying resource version is not allowed when using continue"),
            ),
            (
                "invalid rv",
                "",
                0,
                "invalid",
                ResourceVersionMatch::Unset,
                true,
                0,
                Err("invalid resource version"),
            ),
            (
                "continue rv 100, rv 0",
                "k",
                100,
                "0",
                ResourceVersionMatch::Unset,
                true,
                0,
                Ok(100),
            ),
            (
                "continue rv 100, no rv",
                "k",
                100,
                "",
                ResourceVersionMatch::Unset,
                true,
                0,
                Ok(100),
            ),
            (
                "continue rv 0",
                "k",
                0,
                "",
                ResourceVersionMatch::Unset,
                true,
                0,
                Ok(0),
            ),
            (
                "continue rv -1",
                "k",
                -1,
                "",
                ResourceVersionMatch::Unset,
                true,
                0,
                Ok(0),
            ),
            (
                "no rv",
                "",
                0,
                "",
                ResourceVersionMatch::Unset,
                true,
                0,
                Ok(0),
            ),
            (
                "not older than",
                "",
                0,
                "200",
                ResourceVersionMatch::NotOlderThan,
                true,
                0,
                Ok(0),
            ),
            (
                "exact",
                "",
                0,
                "200",
                ResourceVersionMatch::Exact,
                true,
                0,
                Ok(200),
            ),
            (
                "legacy non-recursive with limit",
                "",
                0,
                "200",
                ResourceVersionMatch::Unset,
                false,
                5,
                Ok(0),
            ),
            (
                "legacy recursive without limit",
                "",
                0,
                "200",
                ResourceVersionMatch::Unset,
                true,
                0,
                Ok(0),
            ),
            (
                "legacy recursive with limit",
                "",
                0,
                "200",
                ResourceVersionMatch::Unset,
                true,
                5,
                Ok(200),
            ),
        ];
        for (name, continue_key, continue_rv, rv, rv_match, recursive, limit, want) in cases {
            let mut options = ListOptions {
                resource_version: rv.to_owned(),
                resource_version_match: rv_match,
                recursive,
                ..ListOptions::default()
            };
            options.predicate.limit = limit;
            let got = resolve(continue_key, continue_rv, &options);
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{name}"),
                (Err(err), Err(want)) => assert!(err.to_string().contains(want), "{name}: {err}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    fn resolve(continue_key: &str, continue_rv: i64, options: &ListOptions) -> Result<i64> {
        resolve_rev(continue_key, continue_rv, options, "/k")
    }
}
