//! Resource names as people type them: kubectl's short names (`cm`, `svc`, `deploy`),
//! singulars (`configmap`, `deployment.apps`), and a check that refuses a name the
//! layout does not know rather than laying it out as a new custom resource.
//!
//! A typo such as `configmap` for `configmaps` would otherwise be laid out as a custom
//! resource at `/registry/configmap/...`, where kube-apiserver never reads and no
//! EncryptionConfiguration entry applies: a silent wrong answer. The short names are
//! those kube-apiserver's discovery advertises for its built-in resources (what
//! `kubectl api-resources` shows).

use apistore_storage::GroupResource;

use crate::{LayoutError, ResourceLayout, StorageLayout};

/// kubectl's short names of built-in resources, as kube-apiserver's discovery gives
/// them: `(short name, group-resource)`.
pub const SHORT_NAMES: &[(&str, &str)] = &[
    ("cm", "configmaps"),
    ("cs", "componentstatuses"),
    ("ep", "endpoints"),
    ("ev", "events"),
    ("limits", "limitranges"),
    ("ns", "namespaces"),
    ("no", "nodes"),
    ("pvc", "persistentvolumeclaims"),
    ("pv", "persistentvolumes"),
    ("po", "pods"),
    ("rc", "replicationcontrollers"),
    ("quota", "resourcequotas"),
    ("sa", "serviceaccounts"),
    ("svc", "services"),
    ("crd", "customresourcedefinitions.apiextensions.k8s.io"),
    ("crds", "customresourcedefinitions.apiextensions.k8s.io"),
    ("ds", "daemonsets.apps"),
    ("deploy", "deployments.apps"),
    ("rs", "replicasets.apps"),
    ("sts", "statefulsets.apps"),
    ("hpa", "horizontalpodautoscalers.autoscaling"),
    ("cj", "cronjobs.batch"),
    ("csr", "certificatesigningrequests.certificates.k8s.io"),
    ("ev", "events.events.k8s.io"),
    ("ing", "ingresses.networking.k8s.io"),
    ("netpol", "networkpolicies.networking.k8s.io"),
    ("pdb", "poddisruptionbudgets.policy"),
    ("pc", "priorityclasses.scheduling.k8s.io"),
    ("sc", "storageclasses.storage.k8s.io"),
];

impl StorageLayout {
    /// The layout of a resource as people name it: a group-resource (`configmaps`,
    /// `deployments.apps`, `widgets.example.com`), a kubectl short name (`cm`, `deploy`)
    /// or a singular (`configmap`, `deployment.apps`). A name in kube's own groups that
    /// is none of these is an error naming the closest resource; a name in any other
    /// group with a dot is a custom resource (`<group>/<plural>`, JSON).
    pub fn lookup(&self, name: &str) -> Result<ResourceLayout, LayoutError> {
        if let Some(canonical) = self.canonical_name(name) {
            return Ok(self.resource(&canonical));
        }
        let group_resource = GroupResource::parse(name);
        let kube_group = self
            .table
            .rows
            .iter()
            .any(|row| row.group == group_resource.group);
        if !kube_group && group_resource.group.contains('.') && !group_resource.resource.is_empty()
        {
            return Ok(self.resource(name));
        }
        Err(LayoutError::UnknownResource {
            resource: name.to_owned(),
            suggestion: self.closest(name),
        })
    }

    /// The group-resource a name stands for when the layout knows it: itself, a short
    /// name's resource, or a singular's plural.
    pub fn canonical_name(&self, name: &str) -> Option<String> {
        let known = |candidate: &str| {
            let group_resource = GroupResource::parse(candidate);
            self.built_in(&group_resource).map(|_| candidate.to_owned())
        };
        if let Some(found) = known(name) {
            return Some(found);
        }
        if let Some(found) = SHORT_NAMES
            .iter()
            .filter(|(short, _)| *short == name)
            .find_map(|(_, resource)| known(resource))
        {
            return Some(found);
        }
        let group_resource = GroupResource::parse(name);
        plurals(&group_resource.resource).find_map(|plural| {
            let candidate = GroupResource::new(group_resource.group.clone(), plural);
            self.built_in(&candidate).map(|_| candidate.to_string())
        })
    }

    /// The known resource whose name is closest to `name` (by edit distance on the
    /// group-resource string), if any is close enough to be a likely typo.
    pub fn closest(&self, name: &str) -> Option<String> {
        self.table
            .rows
            .iter()
            .map(|row| GroupResource::new(row.group, row.resource).to_string())
            .map(|known| (edit_distance(name, &known), known))
            .filter(|(distance, known)| *distance <= 3.max(known.len() / 4))
            .min_by_key(|(distance, _)| *distance)
            .map(|(_, known)| known)
    }
}

/// The plurals English (and kube's resource names) would make of a singular.
fn plurals(singular: &str) -> impl Iterator<Item = String> + '_ {
    let ies = singular
        .strip_suffix('y')
        .map(|stem| format!("{stem}ies"))
        .into_iter();
    [format!("{singular}s"), format!("{singular}es")]
        .into_iter()
        .chain(ies)
        .filter(move |_| !singular.is_empty())
}

/// Levenshtein distance over bytes (resource names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use apistore_storage::KubeVersion;

    fn layout() -> StorageLayout {
        StorageLayout::for_kube(KubeVersion::LATEST)
    }

    #[test]
    fn short_names_and_singulars_resolve_to_their_resources() {
        for (name, want) in [
            ("configmaps", "configmaps"),
            ("cm", "configmaps"),
            ("configmap", "configmaps"),
            ("svc", "services"),
            ("deploy", "deployments.apps"),
            ("deployment.apps", "deployments.apps"),
            (
                "networkpolicy.networking.k8s.io",
                "networkpolicies.networking.k8s.io",
            ),
            ("ing", "ingresses.networking.k8s.io"),
            ("ev", "events"),
            ("no", "nodes"),
        ] {
            let found = layout()
                .lookup(name)
                .unwrap_or_else(|err| panic!("{name}: {err}"));
            assert_eq!(found.group_resource.to_string(), want, "{name}");
        }
        assert_eq!(layout().lookup("nodes").unwrap().key_prefix, "minions");
    }

    #[test]
    fn custom_resources_are_laid_out_under_their_group() {
        let widgets = layout().lookup("widgets.example.com").unwrap();
        assert_eq!(widgets.key_prefix, "example.com/widgets");
        assert!(widgets.built_in.is_none());
    }

    #[test]
    fn unknown_names_are_refused_with_the_closest_resource() {
        for (name, suggestion) in [
            ("configmapz", Some("configmaps")),
            ("secretss", Some("secrets")),
            ("deploymets.apps", Some("deployments.apps")),
            (
                "ingres.networking.k8s.io",
                Some("ingresses.networking.k8s.io"),
            ),
            ("zzzzzzzzzzzz", None),
        ] {
            let err = layout().lookup(name).unwrap_err();
            match &err {
                LayoutError::UnknownResource {
                    resource,
                    suggestion: found,
                } => {
                    assert_eq!(resource, name);
                    if let Some(suggestion) = suggestion {
                        assert_eq!(found.as_deref(), Some(suggestion), "{name}");
                        assert!(err.to_string().contains(suggestion), "{err}");
                    }
                }
                other => panic!("{name}: {other}"),
            }
        }
        // A name in one of kube's own groups is never taken for a custom resource.
        assert!(layout().lookup("widgets.apps").is_err());
        assert!(layout().lookup("gadgets.networking.k8s.io").is_err());
    }

    #[test]
    fn every_short_name_names_a_resource_of_the_latest_layout() {
        for (short, resource) in SHORT_NAMES {
            // componentstatuses are not stored in etcd; events.k8s.io shares `ev`.
            if *resource == "componentstatuses" || *resource == "events.events.k8s.io" {
                continue;
            }
            assert_eq!(
                layout().canonical_name(short).as_deref(),
                Some(*resource),
                "{short}"
            );
        }
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("configmap", "configmaps"), 1);
        assert_eq!(edit_distance("pods", "pods"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
