//! Asking etcd itself how far its history has been compacted, whoever compacted it.
//!
//! kube's compactor records its compactions under `compact_rev_key`
//! ([`crate::compact_revision`] follows that key), but `etcdctl compact`, etcd's own
//! `--auto-compaction-*` and other tools record nothing there. etcd tells the revision
//! only to a watch that starts before it: the watch is cancelled with the compacted
//! revision. This asks exactly that, for messages that must say which revisions are
//! gone (an `Expired` read at an exact revision).

use std::time::Duration;

use apistore_storage::Result;
use etcd_client::WatchOptions;

use crate::EtcdClient;
use crate::error::from_etcd;

/// A key no object lives under, so that the probe watch replays no events.
const PROBE_KEY: &[u8] = b"\0apistore/compacted-revision-probe";

impl EtcdClient {
    /// etcd's compacted revision, asked of etcd: `Some(rev)` when revisions up to `rev`
    /// are gone, `None` when nothing is compacted or etcd did not say within `wait`.
    ///
    /// One watch from revision 1 on a key no object uses: etcd cancels it at once with
    /// the compacted revision when there is one, and otherwise only confirms it; the
    /// confirmation is waited past for at most `wait`, so a call when nothing is
    /// compacted takes `wait`. Meant for explaining an `Expired` error, after which etcd
    /// answers at once.
    ///
    /// # Errors
    ///
    /// etcd could not be reached, or refused the watch.
    pub async fn etcd_compacted_revision(&self, wait: Duration) -> Result<Option<i64>> {
        let key = String::from_utf8_lossy(PROBE_KEY).into_owned();
        let options = WatchOptions::new().with_start_revision(1);
        let mut client = self.inner.clone();
        let mut stream = client
            .watch(PROBE_KEY, Some(options))
            .await
            .map_err(|err| from_etcd(&key, err))?;
        let answer = tokio::time::timeout(wait, async {
            loop {
                match stream.message().await {
                    Ok(Some(response)) if response.compact_revision() > 0 => {
                        return Ok(Some(response.compact_revision()));
                    }
                    Ok(Some(response)) if response.canceled() => return Ok(None),
                    Ok(Some(_)) => {}
                    Ok(None) => return Ok(None),
                    Err(err) => return Err(from_etcd(&key, err)),
                }
            }
        })
        .await
        .unwrap_or(Ok(None));
        // Dropping the stream closes its gRPC stream, which ends the watch in etcd.
        drop(stream);
        answer
    }
}
