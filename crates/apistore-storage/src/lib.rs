//! The storage contract of apistore.
//!
//! This crate is the bottom layer: it says what a store of Kubernetes-style API objects
//! does, with no etcd and no runtime in sight. It follows `k8s.io/apiserver/pkg/storage`
//! at v0.31.1: the [`Storage`] trait is its `storage.Interface`, [`StorageError`] keeps
//! its error kinds, [`SelectionPredicate`] its selection rules.
//!
//! - objects are reached through [`ApiObject`], implemented for [`DynamicObject`] and,
//!   with the `k8s-openapi` feature, for every k8s-openapi resource type;
//! - a [`Codec`] turns them into bytes ([`JsonCodec`] ships here);
//! - backends such as `apistore-etcd3` implement [`Storage`].
//!
//! ```
//! use apistore_storage::{ApiObject, Codec, DynamicObject, JsonCodec, Preconditions};
//!
//! let mut pod = DynamicObject::new("v1", "Pod", "nginx").within("default");
//! pod.metadata.uid = "1234".into();
//! let bytes = JsonCodec::<DynamicObject>::new().encode(&pod).unwrap();
//! assert!(bytes.starts_with(b"{\"apiVersion\":\"v1\""));
//! assert!(Preconditions::uid("1234").check("/registry/pods/default/nginx", &pod).is_ok());
//! ```
//!
//! # Feature flags
//! - `k8s-openapi`: implement [`ApiObject`] for k8s-openapi types. The application picks
//!   the k8s-openapi version feature.

mod codec;
mod corrupt;
mod error;
mod group_resource;
mod interface;
pub mod key_prefix;
pub mod kms_observer;
mod kube_version;
mod list;
mod list_observer;
mod object;
mod options;
mod selection;
pub mod selector;
mod shared;
mod stats;
mod status;
mod stored_selector;
mod transformation;
mod watch;

pub use codec::{Codec, CodecError, JsonCodec};
pub use corrupt::{
    CorruptListItem, CorruptObjectError, CorruptReason, MAX_CORRUPT_OBJECTS_IN_LIST,
    StoreReadErrors, TOO_MANY_CORRUPT_OBJECTS,
};
pub use error::{
    BoxError, CAUSE_RESOURCE_VERSION_TOO_LARGE, ErrorKind, RESOURCE_VERSION_SET_ON_CREATE, Result,
    StorageError,
};
pub use group_resource::GroupResource;
pub use interface::{Storage, Versioner};
pub use kube_version::{KubeVersion, ParseKubeVersionError};
pub use list::{ListMeta, ObjectList};
pub use list_observer::CachedListObserver;
pub use object::{
    ApiObject, DynamicObject, Fields, INITIAL_EVENTS_END_ANNOTATION, Labels, MetaAccessor,
    ObjectMeta,
};
pub use options::{
    DeleteOptions, GetOptions, ListOptions, Preconditions, ResourceVersionMatch, ResponseMeta,
    UnknownResourceVersionMatch, Update, UpdateOptions, ValidateObjectFn,
};
pub use selection::SelectionPredicate;
pub use selector::{FieldSelector, LabelSelector, SelectorError};
pub use shared::Shared;
pub use stats::{KeysFn, KeysFuture, Stats};
pub use status::{Status, StatusCause, StatusDetails, StatusListMeta, StatusReason};
pub use stored_selector::{SelectByView, StoredSelector};
pub use transformation::TransformationType;
pub use watch::{WatchEvent, WatchStream};

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
