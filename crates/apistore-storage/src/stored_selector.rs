//! A list's selectors judged on the stored bytes, before an object is decoded.
//!
//! kube-apiserver's store decodes every value a list reads and only then asks the
//! selectors about it: a list of the Pods on one node (`spec.nodeName=`) decodes every
//! Pod of the cluster to return a hundredth of them. When a lighter reading of the same
//! bytes gives the labels and fields a selector looks at (a `LazyObject`, which decodes
//! the metadata and reads `spec.nodeName` straight from the protobuf), a store can ask
//! the selectors first and decode only the objects they keep.
//!
//! It is opt-in (apistore-backend's `ObjectLayers::set_stored_selector`, and each
//! store's `with_stored_selector`), and the list is the same either way but in one
//! respect: a value the selector drops is never decoded, so a fault only the full
//! decode would find (a body that does not decode under metadata that does) fails no
//! list that does not select the object, where kube-apiserver fails every list that
//! reads it. A value the lighter reading cannot read at all is decoded as usual, and
//! its error is the usual one.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use crate::{ApiObject, Codec, SelectionPredicate};

/// Judges a list's selectors on an object's plain stored bytes (after the value
/// transformer, before the codec), so that a list decodes only the objects its
/// selectors keep.
///
/// The answer must be the one [`SelectionPredicate::matches`] gives for the decoded
/// object, whenever it is given: a wrong `Some(false)` drops an object from lists.
pub trait StoredSelector: Send + Sync {
    /// Whether the object stored as `data` matches `predicate` (never an empty one),
    /// or `None` when the bytes do not tell: the object is then decoded and judged as
    /// usual. `data` is shared, not copied: a selector may hold it while it judges.
    fn matches_stored(&self, data: &Bytes, predicate: &SelectionPredicate) -> Option<bool>;
}

/// A [`StoredSelector`] that reads each value as a lighter type `V` whose labels and
/// fields are those of the store's own type (a typed Pod's store judged through a
/// `LazyObject` wrapper that makes `spec.nodeName` selectable as the typed one does).
/// A value `V`'s codec cannot decode is left to the store's own decode.
pub struct SelectByView<V> {
    codec: Arc<dyn Codec<V>>,
}

impl<V> SelectByView<V> {
    /// Judges selectors on values read through `codec`.
    pub fn new(codec: Arc<dyn Codec<V>>) -> Self {
        Self { codec }
    }
}

impl<V> fmt::Debug for SelectByView<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectByView")
            .field("view", &std::any::type_name::<V>())
            .finish_non_exhaustive()
    }
}

impl<V: ApiObject + 'static> StoredSelector for SelectByView<V> {
    fn matches_stored(&self, data: &Bytes, predicate: &SelectionPredicate) -> Option<bool> {
        let view = self.codec.decode(data).ok()?;
        Some(predicate.matches(&view))
    }
}

#[cfg(test)]
mod tests {
    use crate::{DynamicObject, JsonCodec, LabelSelector};

    use super::*;

    fn predicate(labels: &str) -> SelectionPredicate {
        SelectionPredicate {
            label: LabelSelector::parse(labels).unwrap(),
            ..SelectionPredicate::everything()
        }
    }

    #[test]
    fn a_view_judges_as_the_decoded_object_and_declines_what_it_cannot_read() {
        let selector = SelectByView::new(Arc::new(JsonCodec::<DynamicObject>::new()));
        let stored = &Bytes::from_static(
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"app":"web"}}}"#,
        );
        assert_eq!(
            selector.matches_stored(stored, &predicate("app=web")),
            Some(true)
        );
        assert_eq!(
            selector.matches_stored(stored, &predicate("app=db")),
            Some(false)
        );
        assert_eq!(
            selector.matches_stored(&Bytes::from_static(b"\x00not json"), &predicate("app=web")),
            None
        );
        assert!(format!("{selector:?}").contains("DynamicObject"));
    }
}
