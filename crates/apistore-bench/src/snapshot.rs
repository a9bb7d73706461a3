//! The watch cache's snapshots (kube 1.34+'s `ListFromCacheSnapshot`) against the etcd
//! range they replace (`--only "cacher snapshot"`): 10,000 objects of 1 KiB, then 100
//! more writes, so that the revision listed is in the cache's past and only a
//! snapshot holds it; then, at that revision,
//!
//! - *Exact*: one list with resourceVersionMatch=Exact, from the cache (arm A) against
//!   the same list from the etcd3 store (arm B: what the cache of kube 1.31–1.33 sends
//!   it to);
//! - *continued*: the same list as a walk of pages of 500, the first page Exact and
//!   the others with the continue token of the page before (every page a snapshot
//!   read in arm A; in arm B each an etcd range).
//!
//! Both arms check every answer's length, so neither can win by returning less.

use std::hint::black_box;
use std::sync::Arc;

use apistore_cacher::{Cacher, CacherConfig};
use apistore_etcd3::Etcd3Store;
use apistore_storage::{ListOptions, ResourceVersionMatch, Storage};

use crate::bench::{Backend, Bench};
use crate::driver;
use crate::error::{BenchError, Result};
use crate::object::{RESOURCE, object_name, store_namespace_key};
use crate::stats::{Comparison, Section};

/// The workloads' names, for `--only`.
pub(crate) const EXACT: &str = "cacher snapshot Exact";
pub(crate) const CONTINUED: &str = "cacher snapshot continued";

const ARMS: [&str; 2] = ["cache snapshot", "etcd3 store"];
const NAMESPACE: &str = "cacher-snapshot";
/// Writes after the listed revision, so that the cache's current state is not it.
const LATER_WRITES: u64 = 100;

type Shared = apistore_storage::Shared<crate::object::BenchObject>;

/// Whether any snapshot workload is selected.
pub(crate) fn selected(settings: &crate::settings::Settings) -> bool {
    settings.selected(EXACT) || settings.selected(CONTINUED)
}

impl Bench {
    /// Both snapshot workloads, and a note on what the cache held.
    pub(crate) async fn snapshot_section(&self) -> Result<(Vec<Comparison>, String)> {
        let objects = self.settings.list_objects;
        println!("  cacher snapshot: filling {objects} objects");
        let names = (0..objects).map(|i| object_name('s', 0, i)).collect();
        self.fill(NAMESPACE, names, &Backend::Raw(Arc::clone(&self.raw)))
            .await?;
        let store = self.shared_store();
        // The newest kube's cacher: snapshots on.
        let cacher = Cacher::new(
            store.clone(),
            CacherConfig::new(format!("/{RESOURCE}"), RESOURCE),
        );
        cacher.wait_until_ready().await?;
        let listed = cacher.resource_version();
        let later = (0..LATER_WRITES).map(|i| object_name('t', 0, i)).collect();
        self.fill(NAMESPACE, later, &Backend::Raw(Arc::clone(&self.raw)))
            .await?;
        let now = u64::try_from(self.current_revision().await?).unwrap_or(0);
        cacher.wait_until_fresh(now).await?;
        let note = format!(
            "cacher snapshot: lists at revision {listed}, {LATER_WRITES} writes before the \
             cache's current revision {}; the cache held {} snapshots",
            cacher.resource_version(),
            cacher.snapshot_count()
        );
        let mut comparisons = Vec::new();
        for (workload, page) in [(EXACT, 0), (CONTINUED, self.settings.list_page)] {
            if self.settings.selected(workload) {
                comparisons.push(
                    self.time_snapshot_lists(workload, &cacher, &store, listed, page)
                        .await?,
                );
            }
        }
        drop(cacher);
        self.clear(NAMESPACE).await?;
        self.compact().await?;
        Ok((comparisons, note))
    }

    /// Times one list at `revision` (in pages of `page`, or whole for 0) through the
    /// cache and through the store, alternately, round after round.
    async fn time_snapshot_lists(
        &self,
        workload: &str,
        cacher: &Cacher<Etcd3Store<Shared>>,
        store: &Etcd3Store<Shared>,
        revision: u64,
        page: i64,
    ) -> Result<Comparison> {
        let objects = self.settings.list_objects;
        println!("  {workload}: cache snapshot against etcd3 store");
        let metrics = self
            .time_lists(objects, |arm| {
                if arm == 0 {
                    walk_op(cacher.clone(), revision, page, objects)
                } else {
                    walk_op(store.clone(), revision, page, objects)
                }
            })
            .await?;
        let shape = if page > 0 {
            format!("pages of {page}")
        } else {
            "whole".to_owned()
        };
        Ok(Comparison::new(
            Section::CacherSnapshot,
            format!("{workload}: {objects} × 1 KiB, {shape}"),
            ARMS,
            metrics,
        ))
    }
}

/// One list of the namespace at exactly `revision` through `store`: whole, or walked in
/// pages of `page` with continue tokens; fails unless it returns `objects` items.
fn walk_op<S>(store: S, revision: u64, page: i64, objects: u64) -> driver::OpFn
where
    S: Storage<Object = Shared> + Clone + Send + Sync + 'static,
{
    driver::op(move |_, _| {
        let store = store.clone();
        async move {
            let key = store_namespace_key(NAMESPACE);
            let mut options = ListOptions::prefix()
                .at(revision.to_string(), ResourceVersionMatch::Exact)
                .limit(page);
            let mut listed = 0u64;
            loop {
                let list = store.list(&key, &options).await?;
                listed += list.items.len() as u64;
                let token = list.metadata.continue_token.clone();
                black_box(list);
                if token.is_empty() {
                    break;
                }
                options = ListOptions::prefix().limit(page);
                options.predicate.continue_token = token;
            }
            if listed != objects {
                return Err(BenchError::Invalid(format!(
                    "listed {listed} objects at {revision}, expected {objects}"
                )));
            }
            Ok(())
        }
    })
}
