//! Watch: a replay of the snapshot's changes under a key after a resourceVersion, in
//! revision order, each once, and then the end of the stream (a snapshot never
//! changes). The start rules, the initial events, the decoding of changes on the
//! consumer's side and the Error events are `apistore_backend::watch`'s, shared with
//! the other stores (kube-apiserver's `etcd3/watcher.go`).
//!
//! A watch from a revision below the compacted one ends with a 410 Error event, as
//! etcd's watch does; one from a revision past the snapshot's last ends with a 504
//! (too large resourceVersion), where a live store would wait for it.

use apistore_backend::watch::{self, Ending, Outgoing, Start, StartPlan};
use apistore_backend::{Change, RawEvent};
use apistore_storage::{ApiObject, ListOptions, Result, StorageError, WatchStream};
use bytes::Bytes;

use crate::index::live_at;
use crate::key::as_directory;
use crate::mvcc::Revision;
use crate::snapshot::{IndexedRevision, Record};
use crate::store::{SnapshotStore, internal};

/// Changes read from the file and handed to the channel at a time.
const BATCH: usize = 100;

impl<T> SnapshotStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    pub(crate) fn watch_objects(&self, key: &str, options: &ListOptions) -> Result<WatchStream<T>> {
        let mut prepared = self.prepare_key(key)?;
        let plan = StartPlan::for_request(self.layers.versioner(), &prepared, options, false)?;
        if options.recursive {
            prepared = as_directory(prepared);
        }
        let initial_rev = match plan.start {
            Start::At(rev) => rev,
            Start::CurrentStorage => self.snapshot.revision(),
        };
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|err| StorageError::Internal {
                key: prepared.clone(),
                message: format!("a watch needs a tokio runtime: {err}"),
                source: None,
            })?;
        let (out, events) = watch::channel(self.layers.clone(), options.predicate.clone());
        let replay = Replay {
            store: self.clone(),
            key: prepared,
            recursive: options.recursive,
            initial_rev,
            plan,
        };
        runtime.spawn(async move {
            if let Err(ending) = replay.run(&out).await {
                out.end(ending).await;
            }
        });
        Ok(Box::pin(events))
    }
}

struct Replay<T> {
    store: SnapshotStore<T>,
    /// The prepared key; with a trailing `/` when recursive.
    key: String,
    recursive: bool,
    initial_rev: i64,
    plan: StartPlan,
}

impl<T> Replay<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    fn matching(&self) -> Result<Vec<(Bytes, Vec<IndexedRevision>)>> {
        let snapshot = &self.store.snapshot;
        let key = self.key.as_bytes();
        let failed = |err| internal(&self.key, err);
        if self.recursive {
            Ok(snapshot
                .keys_under(key)
                .map_err(failed)?
                .map(|(key, revisions)| (key.clone(), revisions.to_vec()))
                .collect())
        } else {
            let revisions = snapshot.revisions(key).map_err(failed)?;
            if revisions.is_empty() {
                Ok(Vec::new())
            } else {
                Ok(vec![(Bytes::copy_from_slice(key), revisions.to_vec())])
            }
        }
    }

    async fn run(mut self, out: &Outgoing<T>) -> Result<(), Ending> {
        let snapshot = std::sync::Arc::clone(&self.store.snapshot);
        let current = snapshot.revision();
        if self.plan.initial_events {
            if self.initial_rev > 0 {
                watch::check_initial_revision(&self.key, self.initial_rev, current)?;
            }
            self.store.count_read();
            let mut changes = Vec::new();
            for (key, revisions) in self.matching()? {
                let Some(revision) = live_at(&revisions, current) else {
                    continue;
                };
                let record = self.read(&key, revision)?.kv.value;
                let text = String::from_utf8_lossy(&key).into_owned();
                changes.push(RawEvent::initial(text, record, revision.main));
                if changes.len() >= BATCH {
                    out.emit_all(&mut changes).await?;
                }
            }
            out.emit_all(&mut changes).await?;
            self.initial_rev = current;
        }
        if self.plan.end_bookmark {
            out.emit(self.store.layers.bookmark(self.initial_rev, true))
                .await?;
        }
        if self.initial_rev > current {
            watch::check_initial_revision(&self.key, self.initial_rev, current)?;
        }
        if self.initial_rev.saturating_add(1) < snapshot.compact_revision() {
            return Err(watch::watch_expired(&self.key).into());
        }
        // Every change after the start, with the revision before it of the same key.
        let mut changes: Vec<(Bytes, Option<IndexedRevision>, IndexedRevision)> = Vec::new();
        for (key, revisions) in self.matching()? {
            let mut previous = None;
            for at in revisions {
                if at.revision.main > self.initial_rev {
                    changes.push((key.clone(), previous, at));
                }
                previous = Some(at);
            }
        }
        changes.sort_by_key(|(_, _, at)| at.revision);
        let mut batch = Vec::with_capacity(BATCH);
        for (key, previous, at) in changes {
            batch.push(self.change(&key, previous, at)?);
            if batch.len() >= BATCH {
                out.emit_all(&mut batch).await?;
            }
        }
        out.emit_all(&mut batch).await?;
        Ok(())
    }

    fn read(&self, key: &[u8], revision: Revision) -> Result<Record> {
        let at = IndexedRevision {
            revision,
            tombstone: false,
        };
        let record = self
            .store
            .snapshot
            .read(key, at)
            .map_err(|err| internal(&String::from_utf8_lossy(key), err))?;
        Ok(record)
    }

    /// One change as a watch event before decoding.
    fn change(
        &self,
        key: &[u8],
        previous: Option<IndexedRevision>,
        at: IndexedRevision,
    ) -> Result<RawEvent> {
        let text = String::from_utf8_lossy(key).into_owned();
        let previous = previous.filter(|previous| !previous.tombstone);
        let prev_value = match previous {
            Some(previous) => Some(self.read(key, previous.revision)?.kv.value),
            None => None,
        };
        let (value, created) = if at.tombstone {
            (Bytes::new(), false)
        } else {
            let record = self.read(key, at.revision)?;
            let created = record.kv.create_revision == at.revision.main;
            (record.kv.value, created)
        };
        let change = Change::of(
            &text,
            at.revision.main,
            at.tombstone,
            created,
            prev_value.is_some(),
        )?;
        Ok(RawEvent {
            key: text,
            value,
            prev_value,
            rev: at.revision.main,
            change,
        })
    }
}
