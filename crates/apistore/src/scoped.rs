//! Keys from names: a store seen from one namespace (or from the cluster scope), so that
//! callers name objects instead of building `<resource prefix>/<namespace>/<name>` keys.
//!
//! ```no_run
//! use apistore::{ApiStore, DynamicObject, GetOptions, StoreExt};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let api = ApiStore::builder().build().await?;
//! let configmaps = api.dynamic_store("configmaps")?;
//! let default = configmaps.namespaced("default");
//! default.create(DynamicObject::new("v1", "ConfigMap", "cm1").within("default")).await?;
//! let cm = default.get("cm1").await?;
//! assert_eq!(default.key("cm1"), "configmaps/default/cm1");
//! # Ok(()) }
//! ```

use apistore_etcd3::Etcd3Store;
use apistore_storage::{
    ApiObject, DeleteOptions, GetOptions, ListOptions, ObjectList, ResponseMeta, Result, Storage,
    StorageError, Update, UpdateOptions, WatchStream,
};

/// Names instead of keys, for any store that knows its resource's key prefix.
pub trait StoreExt: Storage + Sized {
    /// The key prefix of the store's resource, relative to the store prefix
    /// (`configmaps`, `services/specs`, `example.com/widgets`).
    fn resource_key_prefix(&self) -> &str;

    /// The store seen from one namespace.
    fn namespaced(&self, namespace: &str) -> Scoped<'_, Self> {
        Scoped {
            store: self,
            namespace: namespace.to_owned(),
        }
    }

    /// The store of a cluster-scoped resource (no namespace segment in keys).
    fn cluster(&self) -> Scoped<'_, Self> {
        self.namespaced("")
    }

    /// The key of an object: from its namespace and name.
    fn key_of(&self, object: &Self::Object) -> String {
        key(
            self.resource_key_prefix(),
            object.namespace(),
            object.name(),
        )
    }
}

impl<T> StoreExt for Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    fn resource_key_prefix(&self) -> &str {
        self.resource_prefix().trim_start_matches('/')
    }
}

#[cfg(feature = "memory")]
impl<T> StoreExt for apistore_memory::MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    fn resource_key_prefix(&self) -> &str {
        self.resource_prefix().trim_start_matches('/')
    }
}

#[cfg(feature = "watch-cache")]
impl<S> StoreExt for apistore_cacher::Cacher<S>
where
    S: StoreExt + Clone + Send + Sync + 'static,
    S::Object: ApiObject + Clone + Default + Send + Sync + 'static,
    Self: Storage<Object = S::Object>,
{
    fn resource_key_prefix(&self) -> &str {
        self.storage().resource_key_prefix()
    }
}

fn key(prefix: &str, namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        format!("{prefix}/{name}")
    } else {
        format!("{prefix}/{namespace}/{name}")
    }
}

/// A store seen from one namespace, or from the cluster scope (empty namespace).
#[derive(Debug)]
pub struct Scoped<'a, S> {
    store: &'a S,
    namespace: String,
}

impl<S: StoreExt> Scoped<'_, S> {
    /// The key of the object called `name` here.
    pub fn key(&self, name: &str) -> String {
        key(self.store.resource_key_prefix(), &self.namespace, name)
    }

    /// The prefix every object here lies under.
    pub fn prefix(&self) -> String {
        let prefix = self.store.resource_key_prefix();
        if self.namespace.is_empty() {
            prefix.to_owned()
        } else {
            format!("{prefix}/{}", self.namespace)
        }
    }

    /// Reads the object called `name`.
    pub async fn get(&self, name: &str) -> Result<S::Object> {
        self.store
            .get(&self.key(name), &GetOptions::default())
            .await
    }

    /// Creates `object` under its name; its namespace must be this one (kube-apiserver
    /// refuses an object whose namespace differs from the request's).
    pub async fn create(&self, object: S::Object) -> Result<S::Object> {
        let key = self.key(object.name());
        if object.namespace() != self.namespace {
            return Err(StorageError::bad_request(
                key,
                format!(
                    "the namespace of the object ({:?}) does not match the namespace of the request ({:?})",
                    object.namespace(),
                    self.namespace
                ),
            ));
        }
        self.store.create(&key, object, 0).await
    }

    /// Deletes the object called `name`.
    pub async fn delete(&self, name: &str) -> Result<S::Object> {
        self.store
            .delete(&self.key(name), DeleteOptions::default())
            .await
    }

    /// Updates the object called `name` by guaranteed update.
    pub async fn update<F>(&self, name: &str, try_update: F) -> Result<S::Object>
    where
        F: FnMut(S::Object, &ResponseMeta) -> Result<Update<S::Object>> + Send,
    {
        self.store
            .guaranteed_update(&self.key(name), UpdateOptions::default(), try_update)
            .await
    }

    /// Lists every object here (always recursive: this is a prefix).
    pub async fn list(&self, options: &ListOptions) -> Result<ObjectList<S::Object>> {
        let options = ListOptions {
            recursive: true,
            ..options.clone()
        };
        self.store.list(&self.prefix(), &options).await
    }

    /// Watches every object here (always recursive: this is a prefix).
    pub async fn watch(&self, options: &ListOptions) -> Result<WatchStream<S::Object>> {
        let options = ListOptions {
            recursive: true,
            ..options.clone()
        };
        self.store.watch(&self.prefix(), &options).await
    }
}
