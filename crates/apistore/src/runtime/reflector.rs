//! A local copy of the objects a [`watcher`](super::watcher::watcher) reports, in
//! kube-rs's `reflector` shape: a [`Writer`] applies events, any number of [`Store`]
//! clones read.
//!
//! A re-list replaces the copy only when it is complete ([`Event::InitDone`]), so
//! readers never see a half-listed state, and objects deleted while the watch was
//! broken disappear with the re-list.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use apistore_storage::ApiObject;
use futures::{Stream, StreamExt};

use super::watcher::Event;

/// An object's place in the copy: its namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// The namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectRef {
    /// The reference of an object.
    pub fn of(object: &dyn ApiObject) -> Self {
        Self::new(object.namespace(), object.name())
    }

    /// A reference from its parts.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

type Objects<T> = HashMap<ObjectRef, Arc<T>>;

/// The read side of the copy; cheap to clone.
#[derive(Debug)]
pub struct Store<T> {
    objects: Arc<RwLock<Objects<T>>>,
}

impl<T> Clone for Store<T> {
    fn clone(&self) -> Self {
        Self {
            objects: Arc::clone(&self.objects),
        }
    }
}

impl<T> Store<T> {
    /// The object with this namespace and name, if the copy holds it.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        self.read().get(&ObjectRef::new(namespace, name)).cloned()
    }

    /// Every object the copy holds, in no particular order.
    pub fn state(&self) -> Vec<Arc<T>> {
        self.read().values().cloned().collect()
    }

    /// How many objects the copy holds.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the copy holds nothing.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects<T>> {
        // A writer that panicked mid-update left a map that is still whole.
        self.objects.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The write side of the copy.
#[derive(Debug)]
pub struct Writer<T> {
    store: Store<T>,
    /// The objects of a re-list in progress.
    relist: Option<Objects<T>>,
}

/// A new empty copy: its reader and its writer.
pub fn store<T>() -> (Store<T>, Writer<T>) {
    let store = Store {
        objects: Arc::new(RwLock::new(HashMap::new())),
    };
    let writer = Writer {
        store: store.clone(),
        relist: None,
    };
    (store, writer)
}

impl<T: ApiObject + Clone> Writer<T> {
    /// A reader of this writer's copy.
    pub fn as_reader(&self) -> Store<T> {
        self.store.clone()
    }

    /// Applies one watcher event to the copy.
    pub fn apply_watcher_event(&mut self, event: &Event<T>) {
        match event {
            Event::Apply(object) => {
                self.write()
                    .insert(ObjectRef::of(object), Arc::new(object.clone()));
            }
            Event::Delete(object) => {
                self.write().remove(&ObjectRef::of(object));
            }
            Event::Init => self.relist = Some(HashMap::new()),
            Event::InitApply(object) => {
                self.relist
                    .get_or_insert_with(HashMap::new)
                    .insert(ObjectRef::of(object), Arc::new(object.clone()));
            }
            Event::InitDone => {
                let listed = self.relist.take().unwrap_or_default();
                *self.write() = listed;
            }
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Objects<T>> {
        self.store
            .objects
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Passes a watcher's events through, applying each to `writer` first.
pub fn reflector<T, E, W>(mut writer: Writer<T>, events: W) -> impl Stream<Item = W::Item>
where
    T: ApiObject + Clone,
    W: Stream<Item = Result<Event<T>, E>>,
{
    events.map(move |event| {
        if let Ok(event) = &event {
            writer.apply_watcher_event(event);
        }
        event
    })
}

#[cfg(test)]
mod tests {
    use apistore_storage::DynamicObject;

    use super::*;

    fn obj(name: &str, rv: &str) -> DynamicObject {
        let mut o = DynamicObject::new("v1", "ConfigMap", name).within("ns");
        o.metadata.resource_version = rv.to_owned();
        o
    }

    #[test]
    fn a_relist_replaces_the_copy_only_when_complete() {
        let (store, mut writer) = store();
        for event in [
            Event::Init,
            Event::InitApply(obj("a", "1")),
            Event::InitApply(obj("b", "2")),
            Event::InitDone,
        ] {
            writer.apply_watcher_event(&event);
        }
        assert_eq!(store.len(), 2);
        writer.apply_watcher_event(&Event::Apply(obj("a", "3")));
        assert_eq!(store.get("ns", "a").unwrap().metadata.resource_version, "3");
        writer.apply_watcher_event(&Event::Delete(obj("b", "4")));
        assert!(store.get("ns", "b").is_none());
        // A re-list in progress leaves the copy alone; its end drops what it lacked.
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(obj("c", "5")));
        assert_eq!(store.len(), 1);
        assert!(store.get("ns", "a").is_some());
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(store.len(), 1);
        assert!(store.get("ns", "a").is_none());
        assert!(store.get("ns", "c").is_some());
    }
}
