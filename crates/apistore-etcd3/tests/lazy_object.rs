//! An `Etcd3Store<LazyObject>` over the real test etcd: create, get, guaranteed update
//! and list of objects that decode their bodies only when asked (issue 28), a value
//! holding a field no kube schema has, carried through an update byte for byte, and
//! lists whose selectors are judged on the stored bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/lazy_store.rs"]
mod lazy_store;

use apistore_etcd3::Etcd3Store;
use apistore_protobuf::{KubeProtobuf, LazyObject, LazySelector};
use apistore_storage::{
    ApiObject, DynamicObject, GetOptions, KubeVersion, ListOptions, Storage, UpdateOptions,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use apistore_value::{IdentityTransformer, Plaintext, Transformer};
use bytes::Bytes;
use lazy_store::{lazy_store, lazy_store_with};
use serde_json::json;

struct Fixture {
    store: Etcd3Store<LazyObject>,
    raw: etcd_client::Client,
}

impl Fixture {
    async fn new(test: &str) -> Self {
        let (store, endpoint) = lazy_store(test).await;
        let raw = etcd_client::Client::connect([endpoint], None)
            .await
            .unwrap();
        Self { store, raw }
    }

    /// The value and mod revision etcd holds for a store key.
    async fn stored(&mut self, key: &str) -> (Vec<u8>, i64) {
        let etcd_key = self.store.prepare_key(key).unwrap();
        let response = self.raw.get(etcd_key, None).await.unwrap();
        let kv = &response.kvs()[0];
        (kv.value().to_vec(), kv.mod_revision())
    }

    async fn put_raw(&mut self, key: &str, value: Vec<u8>) {
        let etcd_key = self.store.prepare_key(key).unwrap();
        self.raw.put(etcd_key, value, None).await.unwrap();
    }
}

fn pod(name: &str, tier: &str) -> LazyObject {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": format!("uid-{name}"),
            "labels": {"tier": tier},
            "creationTimestamp": "2024-09-12T08:30:15Z"
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{
                "name": "api",
                "image": "registry.example.com/api:v1",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "1", "memory": "512Mi"}}
            }]
        },
        "status": {"phase": "Running", "podIP": "127.0.0.7"}
    }))
    .unwrap();
    LazyObject::from(object)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            break;
        }
    }
    v
}

/// `stored` (kube's envelope: `k8s\0`, typeMeta as field 1, the object as field 2, then
/// empty fields 3 and 4) with `extra` appended to the object's fields.
fn with_object_field(stored: &[u8], extra: &[u8]) -> Vec<u8> {
    let mut pos = 4;
    assert_eq!(stored[pos], 0x0a);
    pos += 1;
    let type_meta_len = read_varint(stored, &mut pos) as usize;
    let type_meta_end = pos + type_meta_len;
    assert_eq!(stored[type_meta_end], 0x12);
    let mut raw_pos = type_meta_end + 1;
    let raw_len = read_varint(stored, &mut raw_pos) as usize;
    let raw = &stored[raw_pos..raw_pos + raw_len];
    let mut out = stored[..type_meta_end].to_vec();
    out.push(0x12);
    varint((raw_len + extra.len()) as u64, &mut out);
    out.extend_from_slice(raw);
    out.extend_from_slice(extra);
    out.extend_from_slice(&stored[raw_pos + raw_len..]);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn create_get_update_and_list_lazy_objects_through_a_real_etcd() {
    let mut fx = Fixture::new("lazy-object-crud").await;
    let key = "pods/ns/p1";

    // Create: the answer holds the bytes now stored, with the revision stamped.
    let created = fx.store.create(key, pod("p1", "web"), 0).await.unwrap();
    let (value, revision) = fx.stored(key).await;
    assert!(value.starts_with(b"k8s\0"));
    assert_eq!(created.resource_version(), revision.to_string());
    assert_eq!(
        created.stored_bytes().map(|b| b.to_vec()),
        Some(value.clone())
    );
    assert!(!created.is_body_decoded());

    // Get: metadata at once, the body when asked, equal to what was created.
    let got = fx.store.get(key, &GetOptions::default()).await.unwrap();
    assert_eq!(got.resource_version(), revision.to_string());
    assert_eq!(got.name(), "p1");
    assert!(!got.is_body_decoded());
    assert_eq!(
        got.body().unwrap(),
        &pod("p1", "web").to_dynamic().unwrap().data
    );

    // A field no kube has (89, a string), written by "a newer kube".
    let mut extra = vec![0xca, 0x05];
    varint(6, &mut extra);
    extra.extend_from_slice(b"future");
    fx.put_raw(key, with_object_field(&value, &extra)).await;
    let (future_value, future_revision) = fx.stored(key).await;
    let unknown = KubeProtobuf::for_version(KubeVersion::V1_37)
        .unknown_fields(&future_value)
        .unwrap();
    assert_eq!(unknown.len(), 1, "{unknown:?}");

    // An update that changes nothing writes nothing: the splice gives back the bytes.
    let same = fx
        .store
        .guaranteed_update(key, UpdateOptions::default(), |object, _| Ok(object.into()))
        .await
        .unwrap();
    assert_eq!(same.resource_version(), future_revision.to_string());
    assert_eq!(
        fx.stored(key).await,
        (future_value.clone(), future_revision)
    );

    // A label change: the new label lands, the unknown field and the body stay.
    let updated = fx
        .store
        .guaranteed_update(key, UpdateOptions::default(), |mut object, _| {
            object
                .metadata_mut()
                .labels
                .insert("tier".to_owned(), "api".to_owned());
            assert!(!object.is_body_decoded());
            Ok(object.into())
        })
        .await
        .unwrap();
    let (updated_value, updated_revision) = fx.stored(key).await;
    assert!(updated_revision > future_revision);
    assert_eq!(updated.resource_version(), updated_revision.to_string());
    assert_eq!(updated.metadata().labels["tier"], "api");
    assert!(updated_value.ends_with(&[&extra[..], b"\x1a\x00\x22\x00"].concat()));
    assert_eq!(
        KubeProtobuf::for_version(KubeVersion::V1_37)
            .unknown_fields(&updated_value)
            .unwrap(),
        unknown
    );
    assert_eq!(updated.body().unwrap(), got.body().unwrap());

    // A body change is encoded whole and still carries the unknown field.
    fx.store
        .guaranteed_update(key, UpdateOptions::default(), |mut object, _| {
            let body = object.body_mut().unwrap();
            body.insert("status".to_owned(), json!({"phase": "Succeeded"}));
            Ok(object.into())
        })
        .await
        .unwrap();
    let (whole_value, _) = fx.stored(key).await;
    assert_eq!(
        KubeProtobuf::for_version(KubeVersion::V1_37)
            .unknown_fields(&whole_value)
            .unwrap()
            .len(),
        1
    );
    let reread = fx.store.get(key, &GetOptions::default()).await.unwrap();
    assert_eq!(reread.body().unwrap()["status"]["phase"], "Succeeded");
    assert_eq!(reread.metadata().labels["tier"], "api");

    // List: every object at the list's revision, bodies untouched; a label selector
    // reads metadata only.
    for (name, tier) in [("p2", "web"), ("p3", "db"), ("p0", "web")] {
        fx.store
            .create(&format!("pods/ns/{name}"), pod(name, tier), 0)
            .await
            .unwrap();
    }
    let list = fx
        .store
        .list("pods/ns", &ListOptions::prefix())
        .await
        .unwrap();
    let names: Vec<&str> = list.items.iter().map(ApiObject::name).collect();
    assert_eq!(names, ["p0", "p1", "p2", "p3"]);
    assert!(list.items.iter().all(|o| !o.is_body_decoded()));
    assert!(list.items.iter().all(|o| !o.resource_version().is_empty()));
    let web = fx
        .store
        .list(
            "pods/ns",
            &ListOptions::prefix().labels("tier=web").unwrap(),
        )
        .await
        .unwrap();
    let names: Vec<&str> = web.items.iter().map(ApiObject::name).collect();
    assert_eq!(names, ["p0", "p2"]);
    assert_eq!(
        list.items[2].body().unwrap(),
        &pod("p2", "web").to_dynamic().unwrap().data
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn managed_fields_stay_stored_through_a_guaranteed_update_and_body_fields_read_without_the_body()
 {
    let mut fx = Fixture::new("lazy-object-managed").await;
    let key = "pods/ns/m1";
    let mut object = pod("m1", "web").into_dynamic().unwrap();
    // Go escapes `>` in fieldsV1 as \u003e: a decode and re-encode would not keep it.
    let fields_v1 = r#"{"f:metadata":{"f:labels":{"f:a\u003eb":{}}}}"#;
    object.metadata.extra.insert(
        "managedFields".to_owned(),
        json!([{
            "manager": "kubelet",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2024-09-12T08:30:15Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": serde_json::from_str::<serde_json::Value>(fields_v1).unwrap()
        }]),
    );
    let stored = KubeProtobuf::for_version(KubeVersion::V1_37)
        .encode_value(&serde_json::to_value(&object).unwrap())
        .unwrap();
    // The raw fieldsV1 text as the encoder wrote it, escaped or not.
    let holds = |value: &[u8], text: &[u8]| value.windows(text.len()).any(|w| w == text);
    let raw_fields_v1: &[u8] = if holds(&stored, br#"f:a\u003eb"#) {
        br#"f:a\u003eb"#
    } else {
        br#"f:a>b"#
    };
    assert!(holds(&stored, raw_fields_v1));
    fx.put_raw(key, stored.clone()).await;

    let got = fx.store.get(key, &GetOptions::default()).await.unwrap();
    assert!(got.is_managed_fields_stored());
    assert_eq!(
        got.field_str(&["spec", "nodeName"]).unwrap().as_deref(),
        Some("node-1")
    );
    assert!(!got.is_body_decoded());
    assert_eq!(
        got.metadata().extra["managedFields"],
        object.metadata.extra["managedFields"]
    );

    // What a controller's update through the store does: an annotation.
    fx.store
        .guaranteed_update(key, UpdateOptions::default(), |mut object, _| {
            object
                .annotations_mut()
                .insert("touched".to_owned(), "yes".to_owned());
            assert!(object.is_managed_fields_stored());
            Ok(object.into())
        })
        .await
        .unwrap();
    let (updated, _) = fx.stored(key).await;
    assert_ne!(updated, stored);
    // The managed fields' stored bytes, escapes and all, are in the new value.
    assert!(holds(&updated, raw_fields_v1));
    let reread = fx.store.get(key, &GetOptions::default()).await.unwrap();
    assert_eq!(reread.metadata().annotations["touched"], "yes");
    assert_eq!(
        reread.metadata().extra["managedFields"],
        object.metadata.extra["managedFields"]
    );
    assert_eq!(reread.body().unwrap(), &object.data);
}

/// The identity transformer, counting the stored values it reads: every read of a key
/// from etcd passes through it, a write's answer does not.
#[derive(Debug, Default)]
struct CountingReads(AtomicUsize);

impl CountingReads {
    fn reads(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Transformer for CountingReads {
    fn transform_from_storage(
        &self,
        data: Bytes,
        authenticated_data: &[u8],
    ) -> apistore_value::Result<Plaintext> {
        self.0.fetch_add(1, Ordering::SeqCst);
        IdentityTransformer.transform_from_storage(data, authenticated_data)
    }

    fn transform_to_storage(
        &self,
        data: Bytes,
        authenticated_data: &[u8],
    ) -> apistore_value::Result<Bytes> {
        IdentityTransformer.transform_to_storage(data, authenticated_data)
    }
}

/// kube's GuaranteedUpdate starts from a caller's cached object (a watch cache's copy)
/// and reads the key only if its compare-and-swap fails. A `LazyObject` that still
/// encodes to the very bytes it was read from holds what was stored at its revision,
/// so the store does the same with it; one whose body was taken to change, or read at
/// an older revision, is not trusted or loses the swap, and the key is read.
#[tokio::test]
async fn a_cached_lazy_object_that_is_its_stored_value_saves_the_read_of_a_guaranteed_update() {
    let counting = Arc::new(CountingReads::default());
    let (store, _) = lazy_store_with("lazy-object-cached", counting.clone()).await;
    let key = "pods/ns/c1";
    store.create(key, pod("c1", "web"), 0).await.unwrap();
    let cached = store.get(key, &GetOptions::default()).await.unwrap();
    assert!(cached.stored_bytes().is_some());
    let annotate = |value: &'static str| {
        move |mut object: LazyObject, _: &_| {
            object
                .annotations_mut()
                .insert("touched".to_owned(), value.to_owned());
            Ok(object.into())
        }
    };
    let with_cached = |object: &LazyObject| UpdateOptions {
        cached_existing_object: Some(object.clone()),
        ..UpdateOptions::default()
    };

    // The cached copy is current and untouched: one compare-and-swap, no read.
    let before = counting.reads();
    let first = store
        .guaranteed_update(key, with_cached(&cached), annotate("first"))
        .await
        .unwrap();
    assert_eq!(counting.reads(), before, "the key was read");
    assert_eq!(first.metadata().annotations["touched"], "first");

    // The same copy again, now a revision behind: the swap fails and its answer is
    // the current value, read once; the update is applied to that.
    let before = counting.reads();
    let second = store
        .guaranteed_update(key, with_cached(&cached), annotate("second"))
        .await
        .unwrap();
    assert_eq!(counting.reads(), before + 1);
    assert_ne!(second.resource_version(), first.resource_version());

    // A copy whose body was changed no longer is its stored bytes: the key is read
    // first, and the update applies to what is stored, not to the copy.
    let mut changed = store.get(key, &GetOptions::default()).await.unwrap();
    changed.body_mut().unwrap()["spec"]["nodeName"] = json!("node-2");
    let before = counting.reads();
    let third = store
        .guaranteed_update(key, with_cached(&changed), annotate("third"))
        .await
        .unwrap();
    assert_eq!(counting.reads(), before + 1);
    let reread = store.get(key, &GetOptions::default()).await.unwrap();
    assert_eq!(reread.metadata().annotations["touched"], "third");
    assert_eq!(reread.resource_version(), third.resource_version());
    assert_eq!(reread.metadata().labels["tier"], "web");
    assert_eq!(
        reread.field_str(&["spec", "nodeName"]).unwrap().as_deref(),
        Some("node-1")
    );
}

/// The items' names and resourceVersions, the continue token and remaining count of
/// every page of a list, following its continue tokens to the end.
async fn pages(
    store: &Etcd3Store<LazyObject>,
    labels: &str,
    fields: &str,
    limit: i64,
) -> Vec<String> {
    let mut options = ListOptions::prefix()
        .labels(labels)
        .unwrap()
        .fields(fields)
        .unwrap()
        .limit(limit);
    let mut out = Vec::new();
    loop {
        let list = store.list("pods/ns", &options).await.unwrap();
        let names: Vec<String> = list
            .items
            .iter()
            .map(|item| format!("{}@{}", item.name(), item.resource_version()))
            .collect();
        out.push(format!(
            "{names:?} continue {:?} remaining {:?}",
            list.metadata.continue_token, list.metadata.remaining_item_count
        ));
        if list.metadata.continue_token.is_empty() {
            return out;
        }
        options = options.continue_from(list.metadata.continue_token);
    }
}

/// A store that judges selectors on the stored protobuf (`LazySelector`) lists, page for
/// page, what the same store decoding every value first lists, on a real etcd: label
/// and name selectors, whole (one page of 300, read on several threads) and paged.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_selector_lists_what_decoding_every_value_lists() {
    let fx = Fixture::new("lazy-object-stored-selector").await;
    for i in 0..300 {
        let tier = if i % 10 == 3 { "db" } else { "web" };
        let name = format!("pod-{i:03}");
        fx.store
            .create(&format!("pods/ns/{name}"), pod(&name, tier), 0)
            .await
            .unwrap();
    }
    let selected = fx
        .store
        .clone()
        .with_stored_selector(Arc::new(LazySelector::for_kube(KubeVersion::V1_37)));
    let mut nonempty = 0;
    for (labels, fields, limit) in [
        ("tier=db", "", 0),
        ("tier=db", "", 7),
        ("tier!=web", "", 40),
        ("", "metadata.name=pod-013", 0),
        ("", "metadata.name!=pod-013", 100),
        ("tier in (db)", "metadata.namespace=ns", 0),
        ("tier=none", "", 0),
    ] {
        let every = pages(&fx.store, labels, fields, limit).await;
        assert_eq!(
            pages(&selected, labels, fields, limit).await,
            every,
            "{labels} {fields} {limit}"
        );
        nonempty += usize::from(every[0].contains("pod-"));
    }
    assert_eq!(nonempty, 6);
}
