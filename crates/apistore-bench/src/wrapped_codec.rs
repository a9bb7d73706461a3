//! The codec of the kube section's wrapped Pods (`LazyPod`, `TypedPod`): the inner
//! object's codec, unchanged, around a newtype that only adds the selectable
//! `spec.nodeName`.

use std::marker::PhantomData;
use std::sync::Arc;

use apistore_storage::{Codec, CodecError};
use bytes::Bytes;

/// A newtype around the object its codec reads and writes.
pub(crate) trait Wrapper: Sized {
    /// The object inside.
    type Inner;
    /// Wraps a decoded object.
    fn wrap(inner: Self::Inner) -> Self;
    /// The object inside.
    fn inner(&self) -> &Self::Inner;
}

/// [`Wrapper`] for a tuple newtype `$wrapper($inner)`.
macro_rules! newtype_wrapper {
    ($wrapper:ty, $inner:ty) => {
        impl $crate::wrapped_codec::Wrapper for $wrapper {
            type Inner = $inner;
            fn wrap(inner: $inner) -> Self {
                Self(inner)
            }
            fn inner(&self) -> &$inner {
                &self.0
            }
        }
    };
}
pub(crate) use newtype_wrapper;

/// `C` (a codec of `W::Inner`) as a codec of `W`.
#[derive(Debug, Clone, Default)]
pub(crate) struct WrappedCodec<W, C> {
    inner: C,
    _w: PhantomData<fn() -> W>,
}

impl<W, C> WrappedCodec<W, C> {
    /// Around `inner`.
    pub(crate) fn new(inner: C) -> Self {
        Self {
            inner,
            _w: PhantomData,
        }
    }

    /// Around `inner`, shared as stores take their codec.
    pub(crate) fn shared(inner: C) -> Arc<Self> {
        Arc::new(Self::new(inner))
    }
}

impl<W, C> Codec<W> for WrappedCodec<W, C>
where
    W: Wrapper + Send + Sync + 'static,
    C: Codec<W::Inner>,
{
    fn encode(&self, object: &W) -> Result<Bytes, CodecError> {
        self.inner.encode(object.inner())
    }

    fn decode(&self, data: &[u8]) -> Result<W, CodecError> {
        self.inner.decode(data).map(W::wrap)
    }

    fn encode_replacing(&self, object: &W, previous: &[u8]) -> Result<Bytes, CodecError> {
        self.inner.encode_replacing(object.inner(), previous)
    }

    fn carries_previous(&self) -> bool {
        self.inner.carries_previous()
    }

    fn round_trips(&self) -> bool {
        self.inner.round_trips()
    }

    fn stored_value<'a>(&self, object: &'a W) -> Option<&'a [u8]> {
        self.inner.stored_value(object.inner())
    }
}
