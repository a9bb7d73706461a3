//! Turns validated entries into the transformer of a group-resource, as kube's
//! `getTransformerOverridesAndKMSPluginProbes` does: each provider is a prefix entry
//! (`k8s:enc:aesgcm:v1:`) holding a list of its keys (`key1:`); a resource named by
//! several entries gets their providers in order; every list reports to the observer,
//! under the resource's name.

use std::collections::HashMap;
use std::sync::Arc;

use super::validate::{ProviderSpec, ResourceSpec};
use crate::kms_v2::KmsV2Envelope;
use crate::{
    IdentityTransformer, PrefixTransformer, PrefixTransformers, TransformError, TransformObserver,
    Transformer,
};
use apistore_storage::GroupResource;

/// The rule of the configuration that applies to `gr`: its own, else its group's
/// `*.<group>`, else `*.*` (kube's precedence); `None` when no entry covers it.
pub(super) fn rule_for(specs: &[ResourceSpec], gr: &GroupResource) -> Option<GroupResource> {
    [gr.clone(), gr.any_in_group(), GroupResource::any()]
        .into_iter()
        .find(|rule| specs.iter().any(|s| s.resources.contains(rule)))
}

/// The transformer for `gr`: the providers of every entry naming its rule, in file
/// order, each a prefix entry (`k8s:enc:aesgcm:v1:`) holding a list of its keys
/// (`key1:`); identity (which refuses encrypted data) when no entry covers it. Every
/// list reports to `observer` under `gr`'s name, even when a wildcard rule covers it:
/// kube 1.32+ labels transformations with the resource whose value they are.
pub(super) fn transformer_for(
    specs: &[ResourceSpec],
    gr: &GroupResource,
    observer: &Arc<dyn TransformObserver>,
    kms: &HashMap<String, Arc<KmsV2Envelope>>,
) -> Arc<dyn Transformer> {
    let Some(rule) = rule_for(specs, gr) else {
        return Arc::new(IdentityTransformer);
    };
    let resource: Arc<str> = gr.to_string().into();
    let providers = specs
        .iter()
        .filter(|spec| spec.resources.contains(&rule))
        .flat_map(|spec| &spec.providers)
        .filter_map(|p| provider_entry(p, observer, &resource, kms))
        .collect();
    Arc::new(
        PrefixTransformers::new(TransformError::NoMatchingPrefix, providers)
            .with_observer(Arc::clone(observer))
            .with_resource(resource),
    )
}

fn provider_entry(
    provider: &ProviderSpec,
    observer: &Arc<dyn TransformObserver>,
    resource: &Arc<str>,
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
                .with_observer(Arc::clone(observer))
                .with_resource(Arc::clone(resource));
            PrefixTransformer::new(kind.prefix(), Arc::new(by_key))
        }
    })
}
