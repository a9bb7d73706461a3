//! GetList: pages, continue tokens and resourceVersion semantics, after `GetList` and
//! `resolveGetListRev` in kube-apiserver's `etcd3/store.go`. The paged read itself is
//! [`pager`], shared with the watcher's initial sync and key scans.

use apistore_storage::{
    ApiObject, ListMeta, ListOptions, ObjectList, ResourceVersionMatch, Result, StorageError,
    Versioner,
};
use apistore_versioning::continue_token;
use bytes::Bytes;

use crate::instrument::{Instrumentation, Operation};
use crate::key::{as_directory, prefix_range_end};
use crate::store::Etcd3Store;

pub(crate) mod pager;

use pager::{OnCompacted, Pager};

/// The largest page asked of etcd when selectors filter most objects out.
const MAX_LIMIT: i64 = 10_000;

/// Counts of one list for `apiserver_storage_list_*`, recorded when dropped: on every
/// exit once the list got as far as reading etcd (kube-apiserver counts a list only
/// once its continue token and resourceVersion were accepted).
struct ListCounts<'a> {
    instrumentation: &'a Instrumentation,
    fetched: usize,
    evaluated: usize,
    returned: usize,
}

impl Drop for ListCounts<'_> {
    fn drop(&mut self) {
        self.instrumentation
            .record_list(self.fetched, self.evaluated, self.returned);
    }
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    pub(crate) async fn list_objects(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> Result<ObjectList<T>> {
        let mut key_prefix = self.prepare_key(key)?;
        let _span = self.instrumentation.list_span(key, options);
        if options.recursive {
            key_prefix = as_directory(key_prefix);
        }
        let predicate = &options.predicate;
        let continuing = !predicate.continue_token.is_empty();

        let mut start_key = key_prefix.as_bytes().to_vec();
        let mut continue_key = String::new();
        let mut continue_rv = 0;
        if options.recursive && continuing {
            let (decoded_key, decoded_rv) =
                continue_token::decode(&predicate.continue_token, &key_prefix).map_err(|err| {
                    StorageError::bad_request(&key_prefix, format!("invalid continue token: {err}"))
                })?;
            start_key = decoded_key.clone().into_bytes();
            continue_key = decoded_key;
            continue_rv = decoded_rv;
        }
        let rev = resolve_rev(&continue_key, continue_rv, options, &key_prefix)?;
        let mut counts = ListCounts {
            instrumentation: &self.instrumentation,
            fetched: 0,
            evaluated: 0,
            returned: 0,
        };

        let (operation, range_end) = if options.recursive {
            let end = prefix_range_end(key_prefix.as_bytes());
            (Operation::List, Some(end))
        } else {
            (Operation::Get, None)
        };
        let mut pager = Pager::new(&key_prefix, start_key, operation)
            .at_revision(rev)
            .on_compacted(if continuing {
                OnCompacted::ContinueFromFirst
            } else {
                OnCompacted::Expired
            });
        if let Some(end) = range_end {
            pager = pager.range_end(end);
        }
        let paging = predicate.limit > 0;
        let mut limit = predicate.limit;
        pager.set_limit(limit);

        let mut items: Vec<T> = Vec::new();
        let mut last_key: Vec<u8> = Vec::new();
        let (has_more, last_count) = loop {
            let page = pager.next_page(self).await?;
            self.layers.validate_minimum_resource_version(
                &key_prefix,
                &options.resource_version,
                page.header_revision,
            )?;
            counts.fetched += page.kvs.len();
            if predicate.is_empty() {
                items.reserve(page.kvs.len());
            }
            let mut has_more = page.more;
            for kv in page.kvs {
                if paging && items.len() as i64 >= predicate.limit {
                    has_more = true;
                    break;
                }
                let mod_revision = kv.mod_revision();
                let (item_key, value) = kv.into_key_value();
                // Borrowed for UTF-8 keys (all keys the store writes): no copy per item.
                let item_key_text = String::from_utf8_lossy(&item_key);
                let (data, _) = self
                    .layers
                    .transform_from_storage(&item_key_text, Bytes::from(value))?;
                let item = self.layers.decode(&item_key_text, &data, mod_revision)?;
                if predicate.matches(&item) {
                    items.push(item);
                }
                counts.evaluated += 1;
                last_key = item_key;
            }
            if !has_more || !paging || items.len() as i64 >= predicate.limit {
                break (has_more, page.count);
            }
            // Selectors dropped objects: read further, in larger pages, to fill this one.
            if limit < MAX_LIMIT {
                limit = (limit * 2).min(MAX_LIMIT);
                pager.set_limit(limit);
            }
        };
        counts.returned = items.len();
        let with_rev = pager.revision();

        let next = continue_token::prepare(
            &last_key,
            &key_prefix,
            with_rev,
            last_count,
            has_more,
            predicate,
        )
        .map_err(|err| StorageError::Internal {
            key: key_prefix.clone(),
            message: err.to_string(),
            source: Some(Box::new(err)),
        })?;
        let (continue_value, remaining) = match next {
            Some(page) => (page.continue_token, page.remaining_item_count),
            None => (String::new(), None),
        };
        let mut metadata = ListMeta::default();
        self.layers
            .versioner()
            .update_list(
                &mut metadata,
                with_rev.max(0).unsigned_abs(),
                continue_value,
                remaining,
            )
            .map_err(|err| err.with_key(key_prefix.clone()))?;
        Ok(ObjectList::new(items, metadata))
    }
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
        // Checked against the answer's revision once etcd has answered.
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
