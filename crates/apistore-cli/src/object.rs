//! The objects `list` and `watch` read: a [`DynamicObject`] whose selectable fields are
//! kube's for its kind (`spec.nodeName` of a pod, `type` of a secret), so that the store
//! evaluates the whole field selector itself. A watch then turns an object that stops
//! or starts matching into DELETED or ADDED, from the previous value etcd sends, as
//! kube-apiserver's watchers do.
//!
//! With `--skip-undecodable`, the store is built with a codec and a transformer that
//! turn a value they cannot read into an object marked unreadable instead of an error,
//! so that a watch goes past it rather than ending.

use std::sync::Arc;

use apistore::layers::etcd3::Etcd3Store;
use apistore::layers::value::{Plaintext, TransformError, Transformer};
use apistore::{
    ApiObject, ApiStore, Codec, CodecError, DynamicObject, Fields, MetaAccessor, StorageCodec,
    StorageError,
};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// An object of any kind, with kube's selectable fields for its kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Selectable {
    pub(crate) object: DynamicObject,
    /// Why the stored value could not be read, for a stand-in object (only from a
    /// store made with `skip_undecodable`).
    #[serde(skip)]
    pub(crate) unreadable: Option<Unreadable>,
}

/// A value that could not be decrypted or decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreadable {
    /// The etcd key, when the failing layer knows it (the transformer does, the codec
    /// does not).
    pub(crate) key: Option<String>,
    /// What went wrong.
    pub(crate) reason: String,
}

impl ApiObject for Selectable {
    fn meta(&self) -> &dyn MetaAccessor {
        self.object.meta()
    }

    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        self.object.meta_mut()
    }

    fn fields(&self) -> Fields {
        let mut fields = self.object.fields();
        crate::fields::extra_fields(
            &self.object.api_version,
            &self.object.kind,
            &self.object.data,
            &mut fields,
        );
        fields
    }
}

/// A store of [`Selectable`] objects for `resource`, encoded and encrypted as the
/// facade's stores are; with `skip_undecodable`, unreadable values come back as
/// stand-ins (see [`Selectable::unreadable`]).
pub(crate) fn selectable_store(
    api: &ApiStore,
    resource: &str,
    skip_undecodable: bool,
) -> Result<Etcd3Store<Selectable>, StorageError> {
    if !skip_undecodable {
        return api.store(resource);
    }
    let codec: Arc<dyn Codec<Selectable>> =
        Arc::new(TolerantCodec(api.codec::<Selectable>(resource)));
    let transformer = Arc::new(TolerantTransformer(api.transformer_for(resource)));
    let store = Etcd3Store::with_parts(
        api.client().clone(),
        api.store_config(resource),
        codec,
        transformer,
    );
    Ok(match api.metrics() {
        Some(metrics) => store.with_metrics(metrics.clone()),
        None => store,
    })
}

/// What the tolerant transformer hands the codec in place of a value it cannot read:
/// a NUL-led tag no codec output starts with, then the key and the reason.
const MARKER: &[u8] = b"\0apistore-cli-unreadable\0";

#[derive(Debug)]
struct TolerantTransformer(Arc<dyn Transformer>);

impl Transformer for TolerantTransformer {
    fn transform_from_storage(
        &self,
        data: Bytes,
        authenticated_data: &[u8],
    ) -> Result<Plaintext, TransformError> {
        match self.0.transform_from_storage(data, authenticated_data) {
            Ok(plain) => Ok(plain),
            Err(err) => {
                let mut marked = MARKER.to_vec();
                marked.extend_from_slice(authenticated_data);
                marked.push(0);
                marked.extend_from_slice(err.to_string().as_bytes());
                Ok(Plaintext::fresh(Bytes::from(marked)))
            }
        }
    }

    fn transform_to_storage(
        &self,
        data: Bytes,
        authenticated_data: &[u8],
    ) -> Result<Bytes, TransformError> {
        self.0.transform_to_storage(data, authenticated_data)
    }
}

struct TolerantCodec(StorageCodec<Selectable>);

impl Codec<Selectable> for TolerantCodec {
    fn encode(&self, object: &Selectable) -> Result<Bytes, CodecError> {
        self.0.encode(object)
    }

    fn decode(&self, data: &[u8]) -> Result<Selectable, CodecError> {
        let unreadable = if let Some(marked) = data.strip_prefix(MARKER) {
            let text = String::from_utf8_lossy(marked);
            let (key, reason) = text.split_once('\0').unwrap_or(("", &text));
            Unreadable {
                key: Some(key.to_owned()),
                reason: reason.to_owned(),
            }
        } else {
            match self.0.decode(data) {
                Ok(object) => return Ok(object),
                Err(err) => Unreadable {
                    key: None,
                    reason: err.to_string(),
                },
            }
        };
        Ok(Selectable {
            unreadable: Some(unreadable),
            ..Selectable::default()
        })
    }

    fn encode_replacing(&self, object: &Selectable, previous: &[u8]) -> Result<Bytes, CodecError> {
        self.0.encode_replacing(object, previous)
    }

    fn carries_previous(&self) -> bool {
        self.0.carries_previous()
    }

    fn round_trips(&self) -> bool {
        self.0.round_trips()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apistore::MediaType;

    #[test]
    fn a_pod_selects_on_its_node_and_a_configmap_on_its_name_only() {
        let pod: Selectable = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "default"},
            "spec": {"nodeName": "node-1"}
        }))
        .unwrap();
        let fields = pod.fields();
        assert_eq!(fields["metadata.name"], "p1");
        assert_eq!(fields["spec.nodeName"], "node-1");
        assert_eq!(fields["status.phase"], "");
        let back = serde_json::to_value(&pod).unwrap();
        assert_eq!(
            back["spec"]["nodeName"], "node-1",
            "serialised as the object"
        );
    }

    #[test]
    fn unreadable_values_become_stand_ins() {
        let codec = TolerantCodec(StorageCodec::new(MediaType::Json));
        let bad = codec.decode(b"\x00\x01 not an object").unwrap();
        assert!(bad.unreadable.as_ref().unwrap().key.is_none());
        let mut marked = MARKER.to_vec();
        marked.extend_from_slice(b"/registry/secrets/default/s1\0no key");
        let bad = codec.decode(&marked).unwrap();
        assert_eq!(
            bad.unreadable,
            Some(Unreadable {
                key: Some("/registry/secrets/default/s1".to_owned()),
                reason: "no key".to_owned(),
            })
        );
        let good = codec.decode(br#"{"apiVersion":"v1","kind":"ConfigMap"}"#);
        assert!(good.unwrap().unreadable.is_none());
    }
}
