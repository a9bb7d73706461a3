//! GetList: pages, continue tokens and resourceVersion semantics, step for step as the
//! etcd3 store (kube-apiserver's `GetList` and `resolveGetListRev`): the same range
//! reads (so the same read counts), the same doubling pages when selectors filter, the
//! same tokens, the same 410s after compaction.

use apistore_storage::{
    ApiObject, ListMeta, ListOptions, ObjectList, ResourceVersionMatch, Result, StorageError,
    Versioner,
};
use apistore_versioning::continue_token;

use crate::key::as_directory;
use crate::kv::revision_error;
use crate::mvcc::{Keys, RevisionError};
use crate::store::MemoryStore;

/// The largest page read when selectors filter most objects out.
const MAX_LIMIT: i64 = 10_000;

pub(crate) const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";
pub(crate) const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";
pub(crate) const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    pub(crate) fn list_objects(&self, key: &str, options: &ListOptions) -> Result<ObjectList<T>> {
        let mut prepared = self.prepare_key(key)?;
        if options.recursive {
            prepared = as_directory(prepared);
        }
        let key_prefix = prepared;
        let predicate = &options.predicate;
        let paging = predicate.limit > 0;
        let mut limit = predicate.limit;

        let mut start_key = key_prefix.clone();
        let mut continue_key = String::new();
        let mut continue_rv = 0;
        if options.recursive && !predicate.continue_token.is_empty() {
            let (decoded_key, decoded_rv) =
                continue_token::decode(&predicate.continue_token, &key_prefix).map_err(|err| {
                    StorageError::bad_request(&key_prefix, format!("invalid continue token: {err}"))
                })?;
            start_key.clone_from(&decoded_key);
            continue_key = decoded_key;
            continue_rv = decoded_rv;
        }
        let mut with_rev = resolve_rev(&continue_key, continue_rv, options, &key_prefix)?;

        let mut items: Vec<T> = Vec::new();
        let mut last_key = String::new();
        let mut has_more;
        let mut last_count;
        loop {
            let keys = if options.recursive {
                Keys::Prefix {
                    start: &start_key,
                    prefix: &key_prefix,
                }
            } else {
                Keys::One(&key_prefix)
            };
            self.count_read();
            let range = self
                .kv
                .read()
                .range(&keys, if paging { limit } else { 0 }, with_rev);
            let range = match range {
                Ok(range) => range,
                Err(err) => {
                    return Err(interpret_list_error(
                        err,
                        !predicate.continue_token.is_empty(),
                        &continue_key,
                        &key_prefix,
                    ));
                }
            };
            self.layers.validate_minimum_resource_version(
                &key_prefix,
                &options.resource_version,
                range.revision,
            )?;
            has_more = range.more;
            last_count = range.count;
            // Every later page reads at the revision of the first.
            if with_rev == 0 {
                with_rev = range.revision;
            }
            for kv in range.kvs {
                if paging && items.len() as i64 >= predicate.limit {
                    has_more = true;
                    break;
                }
                let (data, _) = self.layers.transform_from_storage(&kv.key, kv.value)?;
                let item = self.layers.decode(&kv.key, &data, kv.mod_revision)?;
                if predicate.matches(&item) {
                    items.push(item);
                }
                last_key = kv.key;
            }
            if !has_more || !paging || items.len() as i64 >= predicate.limit {
                break;
            }
            // Selectors dropped objects: read further, in larger pages, to fill this one.
            if limit < MAX_LIMIT {
                limit = (limit * 2).min(MAX_LIMIT);
            }
            start_key = format!("{last_key}\0");
        }

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

/// A compacted revision is 410 Expired; a continued list gets a token to go on at the
/// latest revision instead.
fn interpret_list_error(
    err: RevisionError,
    continuing: bool,
    continue_key: &str,
    key_prefix: &str,
) -> StorageError {
    if err != RevisionError::Compacted {
        return revision_error(key_prefix, err);
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
