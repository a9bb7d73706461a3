//! Helpers shared by the unit tests: a scripted transformer, a recording observer, hex.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use crate::{
    Plaintext, PrefixTransformer, Result, TransformError, TransformObserver, TransformationType,
    Transformer,
};

/// kube's `testTransformer`: fixed answers, and remembers what it was given.
#[derive(Debug, Default)]
pub(crate) struct TestTransformer {
    pub(crate) from: &'static [u8],
    pub(crate) to: &'static [u8],
    pub(crate) err: Option<TransformError>,
    pub(crate) stale: bool,
    pub(crate) received_from: Mutex<Option<Bytes>>,
    pub(crate) received_to: Mutex<Option<Bytes>>,
}

impl TestTransformer {
    pub(crate) fn from(value: &'static [u8]) -> Arc<Self> {
        Arc::new(Self {
            from: value,
            ..Self::default()
        })
    }

    pub(crate) fn to(value: &'static [u8]) -> Arc<Self> {
        Arc::new(Self {
            to: value,
            ..Self::default()
        })
    }

    pub(crate) fn failing(err: TransformError) -> Arc<Self> {
        Arc::new(Self {
            err: Some(err),
            ..Self::default()
        })
    }

    pub(crate) fn received_from(&self) -> Option<Bytes> {
        self.received_from.lock().unwrap().clone()
    }

    pub(crate) fn received_to(&self) -> Option<Bytes> {
        self.received_to.lock().unwrap().clone()
    }
}

impl Transformer for TestTransformer {
    fn transform_from_storage(&self, data: Bytes, _: &[u8]) -> Result<Plaintext> {
        *self.received_from.lock().unwrap() = Some(data);
        match &self.err {
            Some(err) => Err(err.clone()),
            None => Ok(Plaintext {
                data: Bytes::from_static(self.from),
                stale: self.stale,
            }),
        }
    }

    fn transform_to_storage(&self, data: Bytes, _: &[u8]) -> Result<Bytes> {
        *self.received_to.lock().unwrap() = Some(data);
        match &self.err {
            Some(err) => Err(err.clone()),
            None => Ok(Bytes::from_static(self.to)),
        }
    }
}

/// An entry of a prefix list.
pub(crate) fn entry(prefix: &'static str, t: Arc<dyn Transformer>) -> PrefixTransformer {
    PrefixTransformer::new(prefix, t)
}

/// One recorded observation: type, prefix label, status, whether a duration came.
pub(crate) type Observation = (&'static str, String, String, bool);

/// Records every observation.
#[derive(Debug, Default)]
pub(crate) struct RecordingObserver {
    calls: Mutex<Vec<Observation>>,
    /// The resource of each observation, in the same order.
    resources: Mutex<Vec<String>>,
}

impl RecordingObserver {
    pub(crate) fn take(&self) -> Vec<Observation> {
        self.resources.lock().unwrap().clear();
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    /// The resources observed since the last take, one per observation.
    pub(crate) fn take_resources(&self) -> Vec<String> {
        self.calls.lock().unwrap().clear();
        std::mem::take(&mut *self.resources.lock().unwrap())
    }
}

impl TransformObserver for RecordingObserver {
    fn observe(
        &self,
        transformation_type: TransformationType,
        transformer_prefix: &str,
        status: &str,
        elapsed: Option<Duration>,
    ) {
        self.calls.lock().unwrap().push((
            transformation_type.as_str(),
            transformer_prefix.to_owned(),
            status.to_owned(),
            elapsed.is_some(),
        ));
    }

    fn observe_resource(
        &self,
        resource: &str,
        transformation_type: TransformationType,
        transformer_prefix: &str,
        status: &str,
        elapsed: Option<Duration>,
    ) {
        self.resources.lock().unwrap().push(resource.to_owned());
        self.observe(transformation_type, transformer_prefix, status, elapsed);
    }
}

/// Decodes lower-case hex.
pub(crate) fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// kube's `fmt.Errorf("test error")`.
pub(crate) fn test_err(msg: &str) -> TransformError {
    TransformError::Crypto(msg.to_owned())
}

/// kube's `TestRoundTrip` lengths.
pub(crate) const ROUND_TRIP_LENGTHS: &[usize] = &[
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 128, 1024,
];

/// kube's `TestRoundTrip` body: random data of each length survives a write and a
/// read under the etcd key `/foo/bar`, never stale.
pub(crate) fn assert_round_trip(name: &str, t: &dyn Transformer) {
    for &len in ROUND_TRIP_LENGTHS {
        let mut data = vec![0u8; len];
        crate::random::fill(&mut data).unwrap();
        let stored = t
            .transform_to_storage(Bytes::from(data.clone()), b"/foo/bar")
            .unwrap();
        let read = t.transform_from_storage(stored, b"/foo/bar").unwrap();
        assert!(!read.stale, "{name} len={len}: unexpected stale output");
        assert_eq!(read.data, data, "{name} len={len}: round trip failed");
    }
}

/// kube's `testGCMKeyRotation` / `TestCBCKeyRotation` / `TestSecretboxKeyRotation`:
/// writes use the first prefix and read back fresh; a changed etcd key fails only for
/// authenticated ciphers; with the keys reordered the old value reads back stale.
pub(crate) fn assert_key_rotation(
    key1: Arc<dyn Transformer>,
    key2: Arc<dyn Transformer>,
    authenticated: bool,
) {
    let list = |a: (&'static str, &Arc<dyn Transformer>),
                b: (&'static str, &Arc<dyn Transformer>)| {
        crate::PrefixTransformers::new(
            test_err("test error"),
            vec![entry(a.0, a.1.clone()), entry(b.0, b.1.clone())],
        )
    };
    let ctx: &[u8] = b"authenticated_data";
    let p = list(("first:", &key1), ("second:", &key2));
    let out = p
        .transform_to_storage(Bytes::from_static(b"firstvalue"), ctx)
        .unwrap();
    assert!(out.starts_with(b"first:"), "unexpected prefix: {out:?}");
    let from = p.transform_from_storage(out.clone(), ctx).unwrap();
    assert!(!from.stale);
    assert_eq!(&from.data[..], b"firstvalue");

    let wrong = p.transform_from_storage(out.clone(), b"incorrect_context");
    if authenticated {
        assert!(wrong.is_err(), "expected unauthenticated data");
    } else {
        assert!(
            wrong.is_ok(),
            "this cipher does not authenticate: {wrong:?}"
        );
    }

    let p = list(("second:", &key2), ("first:", &key1));
    let from = p.transform_from_storage(out, ctx).unwrap();
    assert!(from.stale);
    assert_eq!(&from.data[..], b"firstvalue");
}
