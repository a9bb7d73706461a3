//! GetList: pages, continue tokens and resourceVersion semantics, after `GetList` and
//! `resolveGetListRev` in kube-apiserver's `etcd3/store.go`.

use apistore_storage::{
    ApiObject, ListMeta, ListOptions, ObjectList, ResourceVersionMatch, Result, StorageError,
    Versioner,
};
use apistore_versioning::continue_token;
use bytes::Bytes;
use etcd_client::GetOptions as EtcdGetOptions;

use crate::error::{from_etcd, is_compacted};
use crate::instrument::Operation;
use crate::key::{as_directory, prefix_range_end};
use crate::store::Etcd3Store;

/// The largest page asked of etcd when selectors filter most objects out.
const MAX_LIMIT: i64 = 10_000;

const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Counts of one list, for `apiserver_storage_list_*` (recorded on every exit).
#[derive(Default)]
struct ListCounts {
    /// Whether the list got as far as reading etcd: kube-apiserver counts a list only
    /// once its continue token and resourceVersion were accepted.
    counted: bool,
    fetched: usize,
    evaluated: usize,
    returned: usize,
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
        let mut prepared = self.prepare_key(key)?;
        let _span = self.instrumentation.list_span(key, options);
        let mut counts = ListCounts::default();
        let outcome = self
            .list_prepared(&mut prepared, options, &mut counts)
            .await;
        if counts.counted {
            self.instrumentation
                .record_list(counts.fetched, counts.evaluated, counts.returned);
        }
        outcome
    }

    async fn list_prepared(
        &self,
        prepared: &mut String,
        options: &ListOptions,
        counts: &mut ListCounts,
    ) -> Result<ObjectList<T>> {
        if options.recursive {
            *prepared = as_directory(std::mem::take(prepared));
        }
        let key_prefix = prepared.clone();
        let predicate = &options.predicate;
        let paging = predicate.limit > 0;
        let mut limit = predicate.limit;
        let range_end = options
            .recursive
            .then(|| prefix_range_end(key_prefix.as_bytes()));

        let mut start_key: Vec<u8> = key_prefix.clone().into_bytes();
        let mut continue_key = String::new();
        let mut continue_rv = 0;
        if options.recursive && !predicate.continue_token.is_empty() {
            let (decoded_key, decoded_rv) =
                continue_token::decode(&predicate.continue_token, &key_prefix).map_err(|err| {
                    StorageError::bad_request(&key_prefix, format!("invalid continue token: {err}"))
                })?;
            start_key = decoded_key.clone().into_bytes();
            continue_key = decoded_key;
            continue_rv = decoded_rv;
        }
        let mut with_rev = resolve_rev(&continue_key, continue_rv, options, &key_prefix)?;
        counts.counted = true;

        let operation = if options.recursive {
            Operation::List
        } else {
            Operation::Get
        };
        let mut items: Vec<T> = Vec::new();
        let mut last_key: Vec<u8> = Vec::new();
        let mut has_more;
        let mut last_count;
        loop {
            let mut get_options = EtcdGetOptions::new();
            if paging {
                get_options = get_options.with_limit(limit);
            }
            if let Some(end) = &range_end {
                get_options = get_options.with_range(end.clone());
            }
            if with_rev != 0 {
                get_options = get_options.with_revision(with_rev);
            }
            let request = |mut kv: etcd_client::KvClient| {
                let (start, options) = (start_key.clone(), get_options.clone());
                async move { kv.get(start, Some(options)).await }
            };
            let mut response = match self.call_raw(&key_prefix, operation, request).await? {
                Ok(response) => response,
                Err(err) => {
                    return Err(self.interpret_list_error(
                        err,
                        !predicate.continue_token.is_empty(),
                        &continue_key,
                        &key_prefix,
                    ));
                }
            };
            let header_rev = response.header().map_or(0, |h| h.revision());
            self.validate_minimum_resource_version(
                &key_prefix,
                &options.resource_version,
                header_rev,
            )?;
            has_more = response.more();
            last_count = response.count();
            let kvs = response.take_kvs();
            counts.fetched += kvs.len();
            if kvs.is_empty() && has_more {
                return Err(StorageError::Internal {
                    key: key_prefix,
                    message:
                        "no results were found, but etcd indicated there were more values remaining"
                            .to_owned(),
                    source: None,
                });
            }
            // Every later page reads at the revision of the first.
            if with_rev == 0 {
                with_rev = header_rev;
            }
            if predicate.is_empty() {
                items.reserve(kvs.len());
            }

            for kv in kvs {
                if paging && items.len() as i64 >= predicate.limit {
                    has_more = true;
                    break;
                }
                let mod_revision = kv.mod_revision();
                let (item_key, value) = kv.into_key_value();
                // Borrowed for UTF-8 keys (all keys the store writes): no copy per item.
                let item_key_text = String::from_utf8_lossy(&item_key);
                let (data, _) = self.transform_from_storage(&item_key_text, Bytes::from(value))?;
                let item = self.decode(&item_key_text, &data, mod_revision)?;
                if predicate.matches(&item) {
                    items.push(item);
                }
                counts.evaluated += 1;
                last_key = item_key;
            }

            if !has_more || !paging {
                break;
            }
            if items.len() as i64 >= predicate.limit {
                break;
            }
            // Selectors dropped objects: read further, in larger pages, to fill this one.
            if limit < MAX_LIMIT {
                limit = (limit * 2).min(MAX_LIMIT);
            }
            start_key = last_key.clone();
            start_key.push(0);
        }
        counts.returned = items.len();

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
        self.versioner
            .update_list(
                &mut metadata,
                with_rev.max(0).unsigned_abs(),
                continue_value,
                remaining,
            )
            .map_err(|err| err.with_key(key_prefix.clone()))?;
        Ok(ObjectList::new(items, metadata))
    }

    /// A compacted revision is 410 Expired; a continued list gets a token to go on at
    /// the latest revision instead.
    fn interpret_list_error(
        &self,
        err: etcd_client::Error,
        continuing: bool,
        continue_key: &str,
        key_prefix: &str,
    ) -> StorageError {
        if !is_compacted(&err) {
            return from_etcd(key_prefix, err);
        }
        if !continuing {
            return StorageError::Expired {
                key: key_prefix.to_owned(),
                message: LIST_EXPIRED.to_owned(),
                continue_token: None,
            };
        }
        match continue_token::encode_start_key(continue_key, -1, key_prefix) {
            Ok(token) => StorageError::Expired {
                key: key_prefix.to_owned(),
                message: INCONSISTENT_CONTINUE.to_owned(),
                continue_token: Some(token),
            },
            Err(_) => StorageError::Expired {
                key: key_prefix.to_owned(),
                message: CONTINUE_EXPIRED.to_owned(),
                continue_token: None,
            },
        }
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
