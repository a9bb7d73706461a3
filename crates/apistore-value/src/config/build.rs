//! Turns validated entries into one transformer per configured group-resource, as
//! kube's `getTransformerOverridesAndKMSPluginProbes` does: each provider is a prefix
//! entry (`k8s:enc:aesgcm:v1:`) holding a list of its keys (`key1:`); a resource named
//! by several entries gets their providers in order; every list reports to the observer.

use std::collections::HashMap;
use std::sync::Arc;

use super::validate::{ProviderSpec, ResourceSpec};
use crate::kms_v2::KmsV2Envelope;
use crate::{
    IdentityTransformer, PrefixTransformer, PrefixTransformers, TransformError, TransformObserver,
    Transformer,
};
use apistore_storage::GroupResource;

/// The transformer of each group-resource (or wildcard rule) the configuration names.
pub(super) fn resource_transformers(
    specs: &[ResourceSpec],
    observer: &Arc<dyn TransformObserver>,
    kms: &HashMap<String, Arc<KmsV2Envelope>>,
) -> HashMap<GroupResource, Arc<dyn Transformer>> {
    let mut lists: HashMap<GroupResource, Vec<PrefixTransformer>> = HashMap::new();
    for spec in specs {
        let providers: Vec<PrefixTransformer> = spec
            .providers
            .iter()
            .filter_map(|p| provider_entry(p, observer, kms))
            .collect();
        for gr in &spec.resources {
            lists
                .entry(gr.clone())
                .or_default()
                .extend(providers.iter().cloned());
        }
    }
    lists
        .into_iter()
        .map(|(gr, list)| {
            let t = PrefixTransformers::new(TransformError::NoMatchingPrefix, list)
                .with_observer(Arc::clone(observer));
            (gr, Arc::new(t) as Arc<dyn Transformer>)
        })
        .collect()
}

fn provider_entry(
    provider: &ProviderSpec,
    observer: &Arc<dyn TransformObserver>,
    kms: &HashMap<String, Arc<KmsV2Envelope>>,
) -> Option<PrefixTransformer> {
    Some(match provider {
        ProviderSpec::Identity => PrefixTransformer::new("", Arc::new(IdentityTransformer)),
        // Loading connects every kms provider before building, so it is always found.
        ProviderSpec::Kms(config, _) => {
            let envelope = kms.get(&config.name)?;
            PrefixTransformer::new(
                envelope.prefix(),
                Arc::clone(envelope) as Arc<dyn Transformer>,
            )
        }
        ProviderSpec::Keyed(kind, keys) => {
            let entries = keys
                .iter()
                .map(|k| PrefixTransformer::new(format!("{}:", k.name), Arc::clone(&k.transformer)))
                .collect();
            let by_key = PrefixTransformers::new(kind.no_matching_key(), entries)
                .with_observer(Arc::clone(observer));
            PrefixTransformer::new(kind.prefix(), Arc::new(by_key))
        }
    })
}

/// The transformer for `gr`: its own rule, else its group's `*.<group>`, else `*.*`,
/// else identity (which refuses encrypted data).
pub(super) fn lookup(
    map: &HashMap<GroupResource, Arc<dyn Transformer>>,
    gr: &GroupResource,
) -> Arc<dyn Transformer> {
    map.get(gr)
        .or_else(|| map.get(&gr.any_in_group()))
        .or_else(|| map.get(&GroupResource::any()))
        .cloned()
        .unwrap_or_else(|| Arc::new(IdentityTransformer))
}
