//! kube-apiserver's `APIObjectVersioner` (`pkg/storage/api_object_versioner.go`).

use apistore_storage::{ApiObject, ListMeta, Result, StorageError, Versioner};

/// Parses a resourceVersion: empty is 0; anything but an unsigned decimal number is an
/// invalid-field error on `resourceVersion` that names the value.
pub fn parse_resource_version(resource_version: &str) -> Result<u64> {
    if resource_version.is_empty() {
        return Ok(0);
    }
    // Go's ParseUint accepts only ASCII digits: no sign, no spaces.
    if !resource_version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(resource_version));
    }
    resource_version
        .parse::<u64>()
        .map_err(|_| invalid(resource_version))
}

/// Compares two resourceVersions numerically (kube-apiserver's
/// `CompareResourceVersion`); either one unparsable is an error naming it.
pub fn compare_resource_versions(lhs: &str, rhs: &str) -> Result<std::cmp::Ordering> {
    Ok(parse_resource_version(lhs)?.cmp(&parse_resource_version(rhs)?))
}

fn invalid(resource_version: &str) -> StorageError {
    StorageError::Invalid {
        key: String::new(),
        field: "resourceVersion".to_owned(),
        value: resource_version.to_owned(),
        message: "must be an unsigned decimal number".to_owned(),
    }
}

/// The versioner of every apistore store: resourceVersion is etcd's mod revision as a
/// decimal string, and 0 means "unset".
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiObjectVersioner;

impl Versioner for ApiObjectVersioner {
    fn update_object(&self, object: &mut dyn ApiObject, resource_version: u64) -> Result<()> {
        let text = if resource_version == 0 {
            String::new()
        } else {
            resource_version.to_string()
        };
        object.set_resource_version(text);
        Ok(())
    }

    fn update_list(
        &self,
        list: &mut ListMeta,
        resource_version: u64,
        continue_token: String,
        remaining_item_count: Option<i64>,
    ) -> Result<()> {
        if resource_version == 0 {
            return Err(StorageError::Internal {
                key: String::new(),
                message: "illegal resource version from storage: 0".to_owned(),
                source: None,
            });
        }
        list.resource_version = resource_version.to_string();
        list.continue_token = continue_token;
        list.remaining_item_count = remaining_item_count;
        Ok(())
    }

    fn prepare_object_for_storage(&self, object: &mut dyn ApiObject) -> Result<()> {
        object.set_resource_version(String::new());
        object.clear_self_link();
        Ok(())
    }

    fn object_resource_version(&self, object: &dyn ApiObject) -> Result<u64> {
        parse_resource_version(object.resource_version())
    }

    fn parse_resource_version(&self, resource_version: &str) -> Result<u64> {
        parse_resource_version(resource_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apistore_storage::DynamicObject;

    // TestEtcdParseResourceVersion
    #[test]
    fn parse_resource_version_follows_the_reference_table() {
        for (input, want) in [("", 0), ("0", 0), ("1", 1), ("10", 10)] {
            assert_eq!(parse_resource_version(input).unwrap(), want, "{input:?}");
        }
        assert_eq!(
            parse_resource_version(&u64::MAX.to_string()).unwrap(),
            u64::MAX
        );
        for bad in ["a", " ", "-1", "+1", "1 ", "18446744073709551616", "１"] {
            let err = parse_resource_version(bad).unwrap_err();
            assert_eq!(err.kind(), apistore_storage::ErrorKind::Invalid, "{bad:?}");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    // TestCompareResourceVersion
    #[test]
    fn resource_versions_compare_numerically() {
        use std::cmp::Ordering;
        assert_eq!(compare_resource_versions("1", "2").unwrap(), Ordering::Less);
        assert_eq!(
            compare_resource_versions("2", "2").unwrap(),
            Ordering::Equal
        );
        assert_eq!(
            compare_resource_versions("10", "9").unwrap(),
            Ordering::Greater
        );
        assert!(compare_resource_versions("a", "1").is_err());
    }

    // TestObjectVersioner
    #[test]
    fn object_versioner_reads_and_writes_resource_versions() {
        let v = ApiObjectVersioner;
        let mut obj = DynamicObject::new("v1", "Pod", "p");
        obj.metadata.resource_version = "5".into();
        assert_eq!(v.object_resource_version(&obj).unwrap(), 5);
        obj.metadata.resource_version = "a".into();
        assert!(v.object_resource_version(&obj).is_err());
        v.update_object(&mut obj, 5).unwrap();
        assert_eq!(obj.metadata.resource_version, "5");
        v.update_object(&mut obj, 0).unwrap();
        assert_eq!(obj.metadata.resource_version, "");
    }

    #[test]
    fn prepare_for_storage_clears_resource_version_and_self_link() {
        let v = ApiObjectVersioner;
        let mut obj = DynamicObject::new("v1", "Pod", "p");
        obj.metadata.resource_version = "5".into();
        obj.metadata.self_link = "/api/v1/pods/p".into();
        v.prepare_object_for_storage(&mut obj).unwrap();
        assert_eq!(obj.metadata.resource_version, "");
        assert_eq!(obj.metadata.self_link, "");
    }

    #[test]
    fn update_list_refuses_revision_zero() {
        let v = ApiObjectVersioner;
        let mut meta = ListMeta::default();
        let err = v
            .update_list(&mut meta, 0, String::new(), None)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("illegal resource version from storage: 0")
        );
        v.update_list(&mut meta, 7, "tok".into(), Some(3)).unwrap();
        assert_eq!(meta.resource_version, "7");
        assert_eq!(meta.continue_token, "tok");
        assert_eq!(meta.remaining_item_count, Some(3));
    }
}
