//! The baseline: what a careful program does with etcd-client alone to get the same
//! result as the store, with the same etcd requests.
//!
//! Each function mirrors one store operation in crates/apistore-etcd3 request for
//! request: the same transaction shapes (create on "mod revision is 0"; update and
//! delete as compare-and-swap on the mod revision with a get in the else branch,
//! retried on conflict), the same linearizable reads, the same JSON bytes decoded with
//! plain `serde_json` into the same [`BenchObject`] with its resourceVersion set from
//! the mod revision. What the baseline leaves out is what the store adds: key
//! validation, the value transformer, the codec indirection, the versioner, metrics,
//! spans and error mapping. The connection options are the store's too, since they
//! shape every request (a per-request timeout is a timer per call).

use std::time::Duration;

use apistore_etcd3::ClientConfig;
use etcd_client::{
    Client, Compare, CompareOp, GetOptions, GetResponse, KvClient, Txn, TxnOp, TxnOpResponse,
    TxnResponse, WatchClient,
};

use crate::error::{BenchError, Result};
use crate::object::BenchObject;

/// The store's own range end, so that both arms read exactly the same range.
pub(crate) use apistore_etcd3::prefix_range_end;

/// The largest response accepted: what gRPC can frame.
const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// A raw etcd-client connection.
#[derive(Clone)]
pub(crate) struct Raw {
    client: Client,
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Raw")
    }
}

/// The latest state of one key, as the update and delete loops keep it.
struct State {
    object: BenchObject,
    rev: i64,
    data: Vec<u8>,
}

impl Raw {
    /// Connects as `EtcdClient::connect` does with `ClientConfig`'s defaults
    /// (kube-apiserver's: the dial timeout, 20 s, also bounds each request; keep-alive
    /// every 30 s with a 10 s timeout): the same `ClientConfig::connect_options`, so the
    /// baseline follows the store's connection.
    pub(crate) async fn connect(endpoint: &str) -> Result<Self> {
        Self::connect_with_timeout(endpoint, ClientConfig::default().dial_timeout).await
    }

    /// The same connection whose calls may take up to `timeout` (housekeeping that
    /// etcd answers only when done, such as a physical compaction).
    pub(crate) async fn connect_with_timeout(endpoint: &str, timeout: Duration) -> Result<Self> {
        let options = ClientConfig::default()
            .connect_options()
            .with_timeout(timeout);
        let client = Client::connect([endpoint], Some(options)).await?;
        Ok(Self { client })
    }

    /// The underlying client, for watches and housekeeping.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// A KV client; like the store, one clone per call, since calls take `&mut self`.
    ///
    /// Responses of any size are accepted, as kube-apiserver's client does
    /// (`MaxCallRecvMsgSize: math.MaxInt32`); tonic's default of 4 MiB would refuse a
    /// list of 10,000 objects of 1 KiB.
    pub(crate) fn kv(&self) -> KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
    }

    /// A watch client accepting responses of any size, as kube-apiserver's does.
    pub(crate) fn watch_client(&self) -> WatchClient {
        self.client
            .watch_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
    }

    /// Create: encode (resourceVersion and selfLink cleared), put if absent.
    pub(crate) async fn create(&self, key: &str, mut object: BenchObject) -> Result<BenchObject> {
        object.metadata.resource_version.clear();
        object.metadata.self_link.clear();
        let data = serde_json::to_vec(&object)?;
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, data, None)]);
        let response = self.kv().txn(txn).await?;
        if !response.succeeded() {
            return Err(BenchError::Invalid(format!("{key} already exists")));
        }
        object.metadata.resource_version = revision(&response).to_string();
        Ok(object)
    }

    /// Get: a linearizable read of one key, decoded.
    pub(crate) async fn get(&self, key: &str) -> Result<BenchObject> {
        let response = self.kv().get(key, None).await?;
        Ok(state(key, response)?.object)
    }

    /// Guaranteed update: read, apply `update`, compare-and-swap on the mod revision
    /// with a get in the else branch, retry on the value that branch read. An update
    /// that changes no byte writes nothing.
    pub(crate) async fn guaranteed_update(
        &self,
        key: &str,
        mut update: impl FnMut(BenchObject) -> BenchObject,
    ) -> Result<BenchObject> {
        let response = self.kv().get(key, None).await?;
        let mut current = state(key, response)?;
        loop {
            let mut object = update(current.object);
            object.metadata.resource_version.clear();
            object.metadata.self_link.clear();
            let data = serde_json::to_vec(&object)?;
            if data == current.data {
                object.metadata.resource_version = current.rev.to_string();
                return Ok(object);
            }
            let txn = Txn::new()
                .when([Compare::mod_revision(key, CompareOp::Equal, current.rev)])
                .and_then([TxnOp::put(key, data, None)])
                .or_else([TxnOp::get(key, None)]);
            let response = self.kv().txn(txn).await?;
            if !response.succeeded() {
                current = state(key, else_get(key, &response)?)?;
                continue;
            }
            object.metadata.resource_version = revision(&response).to_string();
            return Ok(object);
        }
    }

    /// Delete: read, compare-and-swap delete on the mod revision with a get in the else
    /// branch, retry on conflict. Returns the last state with the deletion's revision.
    pub(crate) async fn delete(&self, key: &str) -> Result<BenchObject> {
        let response = self.kv().get(key, None).await?;
        let mut current = state(key, response)?;
        loop {
            let txn = Txn::new()
                .when([Compare::mod_revision(key, CompareOp::Equal, current.rev)])
                .and_then([TxnOp::delete(key, None)])
                .or_else([TxnOp::get(key, None)]);
            let response = self.kv().txn(txn).await?;
            if !response.succeeded() {
                current = state(key, else_get(key, &response)?)?;
                continue;
            }
            let mut deleted = current.object;
            deleted.metadata.resource_version = revision(&response).to_string();
            return Ok(deleted);
        }
    }

    /// One page of a recursive list: the range from `start` to the end of `prefix`,
    /// at `rev` (0 for the latest), at most `limit` keys (0 for all), decoded.
    pub(crate) async fn list_page(
        &self,
        prefix: &str,
        start: Vec<u8>,
        rev: i64,
        limit: i64,
    ) -> Result<RawPage> {
        let mut options = GetOptions::new().with_range(prefix_range_end(prefix.as_bytes()));
        if limit > 0 {
            options = options.with_limit(limit);
        }
        if rev != 0 {
            options = options.with_revision(rev);
        }
        let mut response = self.kv().get(start, Some(options)).await?;
        let rev = revision_of(response.header());
        let more = response.more();
        let kvs = response.take_kvs();
        let mut items = Vec::with_capacity(kvs.len());
        let mut last_key = Vec::new();
        for kv in kvs {
            let mod_revision = kv.mod_revision();
            let (key, value) = kv.into_key_value();
            items.push(decode(&value, mod_revision)?);
            last_key = key;
        }
        Ok(RawPage {
            items,
            rev,
            more,
            last_key,
        })
    }

    /// A whole recursive list, in pages of `limit` (0: one request), all read at the
    /// revision of the first page. Calls `each_page` with every page, then drops it.
    pub(crate) async fn list(
        &self,
        prefix: &str,
        limit: i64,
        mut each_page: impl FnMut(&[BenchObject]),
    ) -> Result<usize> {
        let mut start = prefix.as_bytes().to_vec();
        let mut rev = 0;
        let mut listed = 0;
        loop {
            let page = self.list_page(prefix, start, rev, limit).await?;
            listed += page.items.len();
            each_page(&page.items);
            if !page.more || limit == 0 {
                return Ok(listed);
            }
            rev = page.rev;
            start = page.last_key;
            start.push(0);
        }
    }
}

/// One page of a raw list.
#[derive(Debug)]
pub(crate) struct RawPage {
    /// The decoded objects.
    pub(crate) items: Vec<BenchObject>,
    /// The revision the page was read at.
    pub(crate) rev: i64,
    /// Whether etcd has more keys in the range.
    pub(crate) more: bool,
    /// The last key of the page.
    pub(crate) last_key: Vec<u8>,
}

/// Decodes stored JSON and sets the resourceVersion from the mod revision.
pub(crate) fn decode(value: &[u8], mod_revision: i64) -> Result<BenchObject> {
    let mut object: BenchObject = serde_json::from_slice(value)?;
    object.metadata.resource_version = mod_revision.to_string();
    Ok(object)
}

fn state(key: &str, mut response: GetResponse) -> Result<State> {
    let Some(kv) = response.take_kvs().into_iter().next() else {
        return Err(BenchError::Invalid(format!("{key} not found")));
    };
    let rev = kv.mod_revision();
    let (_, data) = kv.into_key_value();
    let object = decode(&data, rev)?;
    Ok(State { object, rev, data })
}

fn else_get(key: &str, response: &TxnResponse) -> Result<GetResponse> {
    match response.op_responses().into_iter().next() {
        Some(TxnOpResponse::Get(get)) => Ok(get),
        other => Err(BenchError::Invalid(format!(
            "{key}: unexpected transaction response {other:?}"
        ))),
    }
}

fn revision(response: &TxnResponse) -> i64 {
    revision_of(response.header())
}

fn revision_of(header: Option<&etcd_client::ResponseHeader>) -> i64 {
    header.map_or(0, etcd_client::ResponseHeader::revision)
}
