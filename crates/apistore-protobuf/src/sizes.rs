//! Where an object's stored protobuf bytes go, read off the wire without decoding the
//! object: its size, its `metadata.managedFields`, and one annotation's value. For
//! reports over many objects (`apistore analyze`), where a full decode of each would
//! cost more than reading the file.
//!
//! Every top-level kube type has its `ObjectMeta` as field 1; in `ObjectMeta`,
//! `annotations` is field 12 (map entries of key 1 and value 2) and `managedFields`
//! field 17 (k8s.io/apimachinery `generated.proto`), the same in every kube version.

use crate::envelope;
use crate::error::ProtobufError;
use crate::wire::{Fields, WireVal};

/// The field of every top-level object that holds its `ObjectMeta`.
const OBJECT_META: u32 = 1;
/// `ObjectMeta.annotations`.
const ANNOTATIONS: u32 = 12;
/// `ObjectMeta.managedFields`.
const MANAGED_FIELDS: u32 = 17;

/// Byte counts of one stored object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetadataSizes {
    /// Bytes of the object's message (the envelope's `raw`).
    pub object: u64,
    /// Bytes of its `metadata.managedFields` entries, tags and lengths included.
    pub managed_fields: u64,
    /// Bytes of the value of the annotation asked for (0 when absent).
    pub annotation: u64,
}

/// The sizes of the object in `stored` (`k8s\0` and kube's envelope), with the value of
/// the annotation `annotation`. Only the envelope, the object's top level and its
/// metadata are walked; the wire format is checked that far.
pub(crate) fn metadata_sizes(
    stored: &[u8],
    annotation: &str,
) -> Result<MetadataSizes, ProtobufError> {
    let env = envelope::parse(stored)?;
    let kind = String::from_utf8_lossy(env.kind);
    let malformed = |path: &str, reason: String| ProtobufError::Decode {
        kind: kind.clone().into_owned(),
        path: path.to_owned(),
        reason,
    };
    let mut sizes = MetadataSizes {
        object: env.raw.len() as u64,
        ..MetadataSizes::default()
    };
    for field in Fields::new(env.raw) {
        let (OBJECT_META, WireVal::Bytes(meta)) = field.map_err(|e| malformed(".", e))? else {
            continue;
        };
        let mut fields = Fields::new(meta);
        let mut start = fields.offset();
        while let Some(field) = fields.next() {
            let (number, value) = field.map_err(|e| malformed(".metadata", e))?;
            let end = fields.offset();
            match (number, value) {
                (MANAGED_FIELDS, _) => sizes.managed_fields += (end - start) as u64,
                (ANNOTATIONS, WireVal::Bytes(entry)) => {
                    let (mut key, mut text) = (&[][..], &[][..]);
                    for part in Fields::new(entry) {
                        match part.map_err(|e| malformed(".metadata.annotations", e))? {
                            (1, WireVal::Bytes(k)) => key = k,
                            (2, WireVal::Bytes(v)) => text = v,
                            _ => {}
                        }
                    }
                    if key == annotation.as_bytes() {
                        sizes.annotation += text.len() as u64;
                    }
                }
                _ => {}
            }
            start = end;
        }
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::KubeProtobuf;

    const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

    fn sizes_of(object: &serde_json::Value) -> crate::MetadataSizes {
        let stored = KubeProtobuf::latest().encode_value(object).unwrap();
        KubeProtobuf::metadata_sizes(&stored, LAST_APPLIED).unwrap()
    }

    #[test]
    fn managed_fields_and_the_annotation_are_measured_on_the_wire() {
        let bare = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm1", "namespace": "ns"}, "data": {"k": "v"}});
        let plain = sizes_of(&bare);
        assert_eq!((plain.managed_fields, plain.annotation), (0, 0));

        let mut full = bare.clone();
        full["metadata"]["annotations"] =
            json!({LAST_APPLIED: "{\"apiVersion\":\"v1\"}", "other": "x"});
        full["metadata"]["managedFields"] = json!([
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}},
            {"manager": "controller", "operation": "Update", "apiVersion": "v1"}
        ]);
        let sizes = sizes_of(&full);
        assert_eq!(sizes.annotation, "{\"apiVersion\":\"v1\"}".len() as u64);
        // The object grew by what the managedFields entries take, tags and lengths
        // included, and by the byte or two the longer metadata's length may need.
        let annotations_only = {
            let mut o = bare;
            o["metadata"]["annotations"] = full["metadata"]["annotations"].clone();
            sizes_of(&o)
        };
        assert!(sizes.managed_fields > 0);
        let grown = sizes.object - annotations_only.object;
        assert!(
            (sizes.managed_fields..=sizes.managed_fields + 2).contains(&grown),
            "{sizes:?} {annotations_only:?}"
        );
    }

    #[test]
    fn malformed_bytes_are_errors_naming_the_kind() {
        assert!(KubeProtobuf::metadata_sizes(b"{}", LAST_APPLIED).is_err());
        let stored = KubeProtobuf::latest()
            .encode_value(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm1", "annotations": {"a": "b"}}}))
            .unwrap();
        // Cut inside the object: the envelope's raw field runs past the end.
        let cut = &stored[..stored.len() - 3];
        let err = KubeProtobuf::metadata_sizes(cut, LAST_APPLIED).unwrap_err();
        assert!(
            err.to_string().contains("ConfigMap") || err.to_string().contains("envelope"),
            "{err}"
        );
    }
}
