//! [`Shared`]: an object behind an `Arc`, for stores whose reads hand one decoded object
//! to many holders (a watch cache's lists and watchers).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::object::{ApiObject, Fields, Labels, MetaAccessor};

/// An object shared behind an [`Arc`]: cloning copies the pointer, and a change (setting
/// the resourceVersion, say) copies the object first only while another holder still
/// has it (`Arc::make_mut`), so no holder ever sees another's change.
///
/// This is how a watch cache hands the same object to every list and every watcher, as
/// kube-apiserver's cacher hands out pointers to one decoded object: store
/// `Shared<Pod>` rather than `Pod` under a cache, and its lists and events cost a
/// pointer copy per item instead of a deep clone. It encodes and decodes as the object
/// itself, so the bytes in etcd are the same either way.
#[derive(Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    /// Shares `object`.
    pub fn new(object: T) -> Self {
        Self(Arc::new(object))
    }

    /// Whether both hold the very same object (not merely equal ones).
    pub fn ptr_eq(this: &Self, other: &Self) -> bool {
        Arc::ptr_eq(&this.0, &other.0)
    }

    /// The `Arc` itself.
    pub fn into_arc(self) -> Arc<T> {
        self.0
    }
}

impl<T: Clone> Shared<T> {
    /// The object to change: copied first if another holder shares it.
    pub fn make_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }

    /// The object, copied only if another holder shares it.
    pub fn into_inner(self) -> T {
        Arc::unwrap_or_clone(self.0)
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Shared<T> {
    fn from(object: T) -> Self {
        Self::new(object)
    }
}

impl<T> From<Arc<T>> for Shared<T> {
    fn from(object: Arc<T>) -> Self {
        Self(object)
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// Every method delegates, so a type's own overrides (its `fields()`, say) still apply.
impl<T: ApiObject + Clone> ApiObject for Shared<T> {
    fn meta(&self) -> &dyn MetaAccessor {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        self.make_mut().meta_mut()
    }
    fn name(&self) -> &str {
        self.0.name()
    }
    fn namespace(&self) -> &str {
        self.0.namespace()
    }
    fn uid(&self) -> &str {
        self.0.uid()
    }
    fn labels(&self) -> &Labels {
        self.0.labels()
    }
    fn resource_version(&self) -> &str {
        self.0.resource_version()
    }
    fn set_resource_version(&mut self, resource_version: String) {
        self.make_mut().set_resource_version(resource_version);
    }
    fn clear_self_link(&mut self) {
        self.make_mut().clear_self_link();
    }
    fn annotations_mut(&mut self) -> &mut Labels {
        self.make_mut().annotations_mut()
    }
    fn fields(&self) -> Fields {
        self.0.fields()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::DynamicObject;

    #[test]
    fn a_change_copies_only_a_shared_object() {
        let mut first = Shared::new(DynamicObject::new("v1", "ConfigMap", "cm1").within("ns"));
        let unshared = std::ptr::from_ref::<DynamicObject>(&first);
        first.set_resource_version("1".to_owned());
        assert_eq!(
            std::ptr::from_ref::<DynamicObject>(&first),
            unshared,
            "no other holder: changed in place"
        );

        let second = first.clone();
        assert!(Shared::ptr_eq(&first, &second));
        first.set_resource_version("2".to_owned());
        assert!(!Shared::ptr_eq(&first, &second));
        assert_eq!(first.resource_version(), "2");
        assert_eq!(second.resource_version(), "1");
        assert_eq!((second.name(), second.namespace()), ("cm1", "ns"));
    }

    #[test]
    fn it_encodes_as_the_object_itself() {
        let object = DynamicObject::new("v1", "ConfigMap", "cm1").within("ns");
        let shared = Shared::new(object.clone());
        assert_eq!(
            serde_json::to_vec(&shared).unwrap(),
            serde_json::to_vec(&object).unwrap()
        );
        let back: Shared<DynamicObject> =
            serde_json::from_slice(&serde_json::to_vec(&object).unwrap()).unwrap();
        assert_eq!(*back, object);
    }
}
