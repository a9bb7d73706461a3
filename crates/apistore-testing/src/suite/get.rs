//! Get cases (`RunTestGet`).

use apistore_storage::{GetOptions, Storage, Update, UpdateOptions};

use super::{Backend, Pod};

/// What one get case expects.
enum Expect {
    /// Exactly this object.
    Object(Box<Pod>),
    /// Any one of these objects.
    OneOf(Vec<Pod>),
    /// A not-found error.
    NotFound,
    /// A too-large-resourceVersion error.
    TooLarge,
}

/// One row of the `RunTestGet` table.
struct GetCase {
    name: &'static str,
    key: String,
    ignore_not_found: bool,
    resource_version: String,
    expect: Expect,
}

/// `RunTestGet`: reads of an object updated once (with a TTL) while another object
/// moved the global revision past it, at no resourceVersion, at `0`, at the created,
/// the current and the latest global resourceVersion, at one too large to be served,
/// and reads of a missing key with and without `ignore_not_found`.
pub async fn run_test_get<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, created) = super::propagate(backend, Pod::new("test-ns", "foo")).await;

    // One update, so that reading at the created resourceVersion has something to tell
    // apart from the current one.
    let mut update = created.clone();
    update
        .metadata
        .annotations
        .insert("test-annotation".into(), "1".into());
    let options = UpdateOptions {
        ignore_not_found: true,
        ..UpdateOptions::default()
    };
    let stored = store
        .guaranteed_update(&key, options, |_, _| {
            Ok(Update::new(update.clone()).with_ttl(1))
        })
        .await
        .unwrap();

    // Another object, so the global revision is past the object's.
    let last = store
        .create("/pods/test-ns/bar", Pod::new("test-ns", "bar"), 0)
        .await
        .unwrap();
    let current_rv: u64 = stored.metadata.resource_version.parse().unwrap();
    let latest_rv: u64 = last.metadata.resource_version.parse().unwrap();
    assert!(latest_rv > current_rv, "create did not move the revision");

    let cases = [
        GetCase {
            name: "get existing",
            key: key.clone(),
            ignore_not_found: false,
            resource_version: String::new(),
            expect: Expect::Object(Box::new(stored.clone())),
        },
        GetCase {
            // Any old state may be served at "0", even from before the object existed.
            name: "resource version 0",
            key: key.clone(),
            ignore_not_found: true,
            resource_version: "0".into(),
            expect: Expect::OneOf(vec![Pod::default(), created.clone(), stored.clone()]),
        },
        GetCase {
            // A get at a resourceVersion means "not older than": both states qualify.
            name: "object created resource version",
            key: key.clone(),
            ignore_not_found: false,
            resource_version: created.metadata.resource_version.clone(),
            expect: Expect::OneOf(vec![created.clone(), stored.clone()]),
        },
        GetCase {
            name: "current object resource version, match=NotOlderThan",
            key: key.clone(),
            ignore_not_found: false,
            resource_version: current_rv.to_string(),
            expect: Expect::Object(Box::new(stored.clone())),
        },
        GetCase {
            name: "latest resource version",
            key: key.clone(),
            ignore_not_found: false,
            resource_version: latest_rv.to_string(),
            expect: Expect::Object(Box::new(stored.clone())),
        },
        GetCase {
            name: "too high resource version",
            key: key.clone(),
            ignore_not_found: false,
            resource_version: i64::MAX.to_string(),
            expect: Expect::TooLarge,
        },
        GetCase {
            name: "get non-existing",
            key: "/non-existing".into(),
            ignore_not_found: false,
            resource_version: String::new(),
            expect: Expect::NotFound,
        },
        GetCase {
            name: "get non-existing, ignore not found",
            key: "/non-existing".into(),
            ignore_not_found: true,
            resource_version: String::new(),
            expect: Expect::Object(Box::default()),
        },
    ];

    // All at once, as the reference runs them in parallel: the order the cases are
    // written in must not decide what a store gets away with. (They also have to finish
    // before the 1 s TTL of the update runs out, as in the reference.)
    let [c0, c1, c2, c3, c4, c5, c6, c7] = &cases;
    tokio::join!(
        check_get(backend, c0),
        check_get(backend, c1),
        check_get(backend, c2),
        check_get(backend, c3),
        check_get(backend, c4),
        check_get(backend, c5),
        check_get(backend, c6),
        check_get(backend, c7),
    );
}

async fn check_get<B: Backend>(backend: &B, case: &GetCase) {
    let options = GetOptions {
        ignore_not_found: case.ignore_not_found,
        resource_version: case.resource_version.clone(),
    };
    let result = backend.store().get(&case.key, &options).await;
    let name = case.name;
    match &case.expect {
        Expect::NotFound => {
            let err = result.expect_err(name);
            assert!(err.is_not_found(), "{name}: expected not found, got {err}");
        }
        Expect::TooLarge => {
            let err = result.expect_err(name);
            assert!(
                err.is_too_large_resource_version(),
                "{name}: expected too large resource version, got {err}"
            );
        }
        Expect::Object(want) => {
            let got = result.unwrap_or_else(|err| panic!("{name}: get failed: {err}"));
            assert_eq!(&got, &**want, "{name}: incorrect pod");
        }
        Expect::OneOf(allowed) => {
            let got = result.unwrap_or_else(|err| panic!("{name}: get failed: {err}"));
            assert!(
                allowed.contains(&got),
                "{name}: incorrect pod {got:?}, expected one of {allowed:?}"
            );
        }
    }
}
