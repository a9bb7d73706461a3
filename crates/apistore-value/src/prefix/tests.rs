//! Ports of kube's `TestPrefixFrom`, `TestPrefixTo`, `TestPrefixFromMetrics` and
//! `TestPrefixToMetrics` (`pkg/storage/value/transformer_test.go`).

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::test_support::{RecordingObserver, TestTransformer, entry, test_err};

/// Input, expected (plain, stale) or error, and the entry that should have matched.
type FromCase<'a> = (
    &'static [u8],
    Result<(&'a [u8], bool)>,
    Option<&'a TestTransformer>,
);
/// Prefix, its transformer, expected output or error.
type ToCase = (&'static str, Arc<TestTransformer>, Result<&'static [u8]>);

fn read(p: &PrefixTransformers, input: &'static [u8]) -> Result<Plaintext> {
    p.transform_from_storage(Bytes::from_static(input), b"")
}

#[test]
fn prefix_from() {
    let test_err = test_err("test error");
    let transform_err = test_err_2();
    let first = TestTransformer::from(b"value1");
    let second = TestTransformer::from(b"value2");
    let fails = TestTransformer::failing(transform_err.clone());
    let stale = Arc::new(TestTransformer {
        from: b"value3",
        stale: true,
        ..TestTransformer::default()
    });
    let p = PrefixTransformers::new(
        test_err.clone(),
        vec![
            entry("first:", first.clone()),
            entry("second:", second.clone()),
            entry("fails:", fails.clone()),
            entry("stale:", stale.clone()),
        ],
    );
    let cases: Vec<FromCase<'_>> = vec![
        (b"first:value", Ok((b"value1", false)), Some(&first)),
        (b"second:value", Ok((b"value2", true)), Some(&second)),
        (b"third:value", Err(test_err), None),
        (b"fails:value", Err(transform_err), Some(&fails)),
        (b"stale:value", Ok((b"value3", true)), Some(&stale)),
    ];
    for (i, (input, want, matched)) in cases.into_iter().enumerate() {
        let got = read(&p, input).map(|pt| (pt.data, pt.stale));
        let got = got
            .as_ref()
            .map(|(d, s)| (&d[..], *s))
            .map_err(Clone::clone);
        assert_eq!(got, want, "case {i}");
        if let Some(t) = matched {
            assert_eq!(
                t.received_from().as_deref(),
                Some(&b"value"[..]),
                "case {i}"
            );
        }
    }
}

fn test_err_2() -> TransformError {
    test_err("transform error")
}

#[test]
fn prefix_to() {
    let transform_err = test_err("test error");
    let cases: Vec<ToCase> = vec![
        (
            "first:",
            TestTransformer::to(b"value1"),
            Ok(b"first:value1"),
        ),
        (
            "second:",
            TestTransformer::to(b"value2"),
            Ok(b"second:value2"),
        ),
        (
            "fails:",
            TestTransformer::failing(transform_err.clone()),
            Err(transform_err),
        ),
    ];
    for (i, (prefix, t, want)) in cases.into_iter().enumerate() {
        let p = PrefixTransformers::new(test_err("test error"), vec![entry(prefix, t.clone())]);
        let got = p.transform_to_storage(Bytes::from_static(b"value"), b"");
        let got = got.as_ref().map(|b| &b[..]).map_err(Clone::clone);
        assert_eq!(got, want, "case {i}");
        assert_eq!(t.received_to().as_deref(), Some(&b"value"[..]), "case {i}");
    }
}

/// The observation kube's metrics test expects, and only that one.
fn observed(
    p: PrefixTransformers,
    write: bool,
    input: &'static [u8],
) -> Vec<crate::test_support::Observation> {
    let obs = Arc::new(RecordingObserver::default());
    let p = p.with_observer(obs.clone());
    if write {
        let _ = p.transform_to_storage(Bytes::from_static(input), b"");
    } else {
        let _ = read(&p, input);
    }
    obs.take()
}

#[test]
fn prefix_from_metrics() {
    let identity = || entry("", TestTransformer::from(b"value1"));
    let identity_err = || entry("", TestTransformer::failing(test_err("test error")));
    let other = || entry("other:", TestTransformer::from(b"value1"));
    let other_err = || entry("other:", TestTransformer::failing(test_err("test error")));
    let list = |entries| PrefixTransformers::new(test_err("test error"), entries);
    let ok = |prefix: &str| vec![("from_storage", prefix.to_owned(), "OK".to_owned(), true)];
    let failed = |prefix: &str| {
        vec![(
            "from_storage",
            prefix.to_owned(),
            "unknown-non-grpc".to_owned(),
            false,
        )]
    };

    // identity prefix
    assert_eq!(
        observed(list(vec![identity(), other()]), false, b"value"),
        ok("identity")
    );
    // other prefix (ok): the failing identity is skipped without a metric
    assert_eq!(
        observed(list(vec![identity_err(), other()]), false, b"other:value"),
        ok("other:")
    );
    // other prefix (error)
    assert_eq!(
        observed(
            list(vec![identity_err(), other_err()]),
            false,
            b"other:value"
        ),
        failed("other:")
    );
    // unknown prefix
    assert_eq!(
        observed(list(vec![identity_err(), other()]), false, b"foo:value"),
        failed("unknown")
    );
}

#[test]
fn prefix_to_metrics() {
    let other = || entry("other:", TestTransformer::from(b"value1"));
    let other_err = || entry("other:", TestTransformer::failing(test_err("test error")));
    let list = |entries| PrefixTransformers::new(test_err("test error"), entries);
    assert_eq!(
        observed(list(vec![other()]), true, b"value"),
        vec![("to_storage", "other:".to_owned(), "OK".to_owned(), true)]
    );
    assert_eq!(
        observed(list(vec![other_err()]), true, b"value"),
        vec![(
            "to_storage",
            "other:".to_owned(),
            "unknown-non-grpc".to_owned(),
            false
        )]
    );
}

#[test]
fn identity_write_is_labelled_with_the_empty_prefix() {
    let p = PrefixTransformers::new(test_err("x"), vec![entry("", TestTransformer::to(b"v"))]);
    assert_eq!(
        observed(p, true, b"value"),
        vec![("to_storage", String::new(), "OK".to_owned(), true)]
    );
}

#[test]
fn overlapping_prefixes_try_every_match_and_aggregate_failures() {
    let a = test_err("first key failed");
    let b = test_err("second key failed");
    let p = PrefixTransformers::new(
        test_err("none"),
        vec![
            entry("k8s:", TestTransformer::failing(a.clone())),
            entry("k8s:", TestTransformer::failing(b.clone())),
        ],
    );
    let err = read(&p, b"k8s:x").unwrap_err();
    assert_eq!(err, TransformError::Aggregate(vec![a.clone(), b]));
    assert_eq!(err.to_string(), "[first key failed, second key failed]");

    let p = PrefixTransformers::new(
        test_err("none"),
        vec![
            entry("k8s:", TestTransformer::failing(a)),
            entry("k8s:", TestTransformer::from(b"ok")),
        ],
    );
    let got = read(&p, b"k8s:x").unwrap();
    assert_eq!((&got.data[..], got.stale), (&b"ok"[..], true));
}

#[test]
fn identity_failure_alone_gives_the_not_found_error() {
    let p = PrefixTransformers::new(
        TransformError::NoMatchingPrefix,
        vec![entry("", TestTransformer::failing(test_err("encrypted")))],
    );
    assert_eq!(
        read(&p, b"x").unwrap_err(),
        TransformError::NoMatchingPrefix
    );
}

#[test]
fn empty_list_refuses_to_write_and_reads_nothing() {
    let p = PrefixTransformers::with_default_error(Vec::new());
    assert_eq!(
        p.transform_to_storage(Bytes::from_static(b"v"), b"")
            .unwrap_err(),
        TransformError::NoWriteTransformer
    );
    assert_eq!(
        read(&p, b"v").unwrap_err(),
        TransformError::NoMatchingTransformer
    );
    assert_eq!(
        TransformError::NoMatchingTransformer.to_string(),
        "the provided value does not match any of the supported transformers"
    );
}
