//! List cases: `RunTestList` (over `seedMultiLevelData`), with the helpers every list
//! file uses (options, predicates, continue tokens, the row checks); the lists of one
//! key or prefix at chosen resourceVersions are in `list_get.rs`.
//!
//! The reference runs the rows of its tables as parallel subtests; here they run
//! concurrently on one task, and every failing row is reported before the case fails.

use apistore_storage::{
    DeleteOptions, FieldSelector, LabelSelector, ListOptions, ObjectList, ResourceVersionMatch,
    SelectionPredicate, StatusReason, Storage, StorageError, Update, UpdateOptions,
};
use apistore_versioning::continue_token;
use futures::future::join_all;

use super::{Backend, Pod};

/// The prefix the reference's `encodeContinueOrDie` encodes against, so that a token's
/// start is exactly the key it is given.
const DUMMY_PREFIX: &str = "adapter";

/// A continue token that starts a list at `key` (relative to the list's prefix,
/// inclusive) and reads at `resource_version`: the reference's `encodeContinueOrDie`.
pub(super) fn continue_at(key: &str, resource_version: i64) -> String {
    continue_token::encode_start_key(
        format!("{DUMMY_PREFIX}{key}"),
        resource_version,
        DUMMY_PREFIX,
    )
    .unwrap()
}

/// A predicate with a field selector (and no label selector).
pub(super) fn field_predicate(field: &str, limit: i64, continue_token: &str) -> SelectionPredicate {
    SelectionPredicate {
        field: FieldSelector::parse(field).unwrap(),
        limit,
        continue_token: continue_token.to_owned(),
        ..SelectionPredicate::everything()
    }
}

/// A predicate that selects everything, with a limit and a continue token.
pub(super) fn paging(limit: i64, continue_token: &str) -> SelectionPredicate {
    SelectionPredicate {
        limit,
        continue_token: continue_token.to_owned(),
        ..SelectionPredicate::everything()
    }
}

/// List options with the given resourceVersion, match, predicate and recursion.
pub(super) fn options(
    resource_version: &str,
    resource_version_match: ResourceVersionMatch,
    predicate: SelectionPredicate,
    recursive: bool,
) -> ListOptions {
    ListOptions {
        resource_version: resource_version.to_owned(),
        resource_version_match,
        predicate,
        recursive,
        ..ListOptions::default()
    }
}

/// A parsed resourceVersion, for "not older than" comparisons.
pub(super) fn parse_rv(resource_version: &str) -> u64 {
    resource_version
        .parse()
        .unwrap_or_else(|err| panic!("resourceVersion {resource_version:?}: {err}"))
}

/// The reference's `resourceVersionNotOlderThan(sentinel)`.
pub(super) fn check_not_older_than(got: &str, sentinel: &str) -> Result<(), String> {
    let parsed: u64 = got
        .parse()
        .map_err(|err| format!("resourceVersion {got:?} does not parse: {err}"))?;
    if parsed < parse_rv(sentinel) {
        return Err(format!(
            "expected a resourceVersion no smaller than {sentinel}, but got {got}"
        ));
    }
    Ok(())
}

/// Whether an error is the reference's too-large-resourceVersion error, which is also
/// an API timeout (`apierrors.IsTimeout`).
pub(super) fn is_too_large_timeout(err: &StorageError) -> bool {
    let status = err.status();
    err.is_too_large_resource_version()
        && status.code == 504
        && status.reason == StatusReason::Timeout.as_str()
}

/// Panics listing every failed row, if any.
pub(super) fn report(case: &str, failures: Vec<String>) {
    let failures: Vec<String> = failures.into_iter().filter(|f| !f.is_empty()).collect();
    assert!(
        failures.is_empty(),
        "{case}: {} row(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The items a row expects.
#[derive(Debug, Clone)]
pub(super) enum Items {
    /// Exactly these, in key order.
    Exactly(Vec<Pod>),
    /// Any one of these lists (reads at resourceVersion 0 may be served stale).
    OneOf(Vec<Vec<Pod>>),
}

/// What a row expects of the list call.
#[derive(Debug, Clone)]
enum Outcome {
    /// A page with these items.
    Page(Items),
    /// A bad-request error (the reference only says "an error"; kube-apiserver's is
    /// a 400).
    BadRequest,
    /// A too-large-resourceVersion error that is also an API timeout.
    TooLarge,
}

/// One row of the `RunTestList` table.
#[derive(Debug, Clone)]
struct ListCase {
    name: &'static str,
    prefix: &'static str,
    rv: String,
    rv_match: ResourceVersionMatch,
    pred: SelectionPredicate,
    outcome: Outcome,
    expect_continue: bool,
    remaining_item_count: Option<i64>,
    /// The response must carry exactly this resourceVersion.
    expect_rv: Option<String>,
    /// The response's resourceVersion must not be older than this.
    expect_rv_not_older_than: Option<String>,
}

impl ListCase {
    fn new(name: &'static str, prefix: &'static str) -> Self {
        Self {
            name,
            prefix,
            rv: String::new(),
            rv_match: ResourceVersionMatch::Unset,
            pred: SelectionPredicate::everything(),
            outcome: Outcome::Page(Items::Exactly(Vec::new())),
            expect_continue: false,
            remaining_item_count: None,
            expect_rv: None,
            expect_rv_not_older_than: None,
        }
    }

    fn rv(mut self, rv: &str) -> Self {
        rv.clone_into(&mut self.rv);
        self
    }

    fn matching(mut self, rv_match: ResourceVersionMatch) -> Self {
        self.rv_match = rv_match;
        self
    }

    fn pred(mut self, pred: SelectionPredicate) -> Self {
        self.pred = pred;
        self
    }

    fn items(mut self, items: &[&Pod]) -> Self {
        self.outcome = Outcome::Page(Items::Exactly(items.iter().map(|p| (*p).clone()).collect()));
        self
    }

    fn one_of(mut self, alternatives: &[&[&Pod]]) -> Self {
        let alternatives = alternatives
            .iter()
            .map(|items| items.iter().map(|p| (*p).clone()).collect())
            .collect();
        self.outcome = Outcome::Page(Items::OneOf(alternatives));
        self
    }

    fn fails(mut self, outcome: Outcome) -> Self {
        self.outcome = outcome;
        self
    }

    fn continues(mut self) -> Self {
        self.expect_continue = true;
        self
    }

    fn remaining(mut self, count: i64) -> Self {
        self.remaining_item_count = Some(count);
        self
    }

    fn echoes(mut self, rv: &str) -> Self {
        self.expect_rv = Some(rv.to_owned());
        self
    }

    fn rv_not_older_than(mut self, rv: &str) -> Self {
        self.expect_rv_not_older_than = Some(rv.to_owned());
        self
    }
}

/// Creates the reference's multi-level layout and returns the resourceVersion from
/// before any of it was written and the objects that remain, in key order:
/// `first/bar` (created, then updated with `spec.nodeName=fakeNode`), `second/bar`,
/// `second/foo`, `third/barfoo`, `third/foo`; `second/baz` is created and deleted.
/// The reference's `seedMultiLevelData`.
pub async fn seed_multi_level_data<B: Backend>(backend: &B) -> (String, Vec<Pod>) {
    let store = backend.store();
    let initial = store
        .list(
            "/pods",
            &options(
                "",
                ResourceVersionMatch::Unset,
                SelectionPredicate::everything(),
                true,
            ),
        )
        .await
        .unwrap_or_else(|err| panic!("failed to determine starting resourceVersion: {err}"));
    let initial_rv = initial.metadata.resource_version;

    let layout = [
        Pod::new("first", "bar"),
        Pod::new("second", "bar"),
        Pod::new("second", "foo"),
        Pod::new("third", "barfoo"),
        Pod::new("third", "foo"),
        Pod::new("second", "baz"),
    ];
    let mut stored = Vec::new();
    for pod in layout {
        let key = pod.key();
        let out = store
            .create(&key, pod, 0)
            .await
            .unwrap_or_else(|err| panic!("failed to create {key}: {err}"));
        stored.push(out);
    }

    // An update, so that a list returning first/bar has to return its new state.
    let first_bar = stored[0].key();
    stored[0] = store
        .guaranteed_update(
            &first_bar,
            UpdateOptions {
                ignore_not_found: true,
                ..UpdateOptions::default()
            },
            |mut pod, _| {
                "fakeNode".clone_into(&mut pod.spec.node_name);
                Ok(Update::new(pod))
            },
        )
        .await
        .unwrap_or_else(|err| panic!("failed to update {first_bar}: {err}"));

    // A delete, so that a list must not return an object that existed once.
    let deleted = stored.pop().unwrap();
    store
        .delete(&deleted.key(), DeleteOptions::default())
        .await
        .unwrap_or_else(|err| panic!("failed to delete {}: {err}", deleted.key()));
    (initial_rv, stored)
}

/// `RunTestList`: the reference's table of recursive lists over
/// [`seed_multi_level_data`] after a compaction at the initial resourceVersion, by
/// prefix, resourceVersion and match, selectors, limits and continue tokens. The
/// backend must compact (see [`Backend::compact`]).
pub async fn run_test_list<B: Backend>(backend: &B) {
    use ResourceVersionMatch::{Exact, NotOlderThan};

    let store = backend.store();
    let (initial_rv, preset) = seed_multi_level_data(backend).await;
    let [first_bar, second_bar, second_foo, third_barfoo, third_foo] = &preset[..] else {
        panic!("seeded {} objects, expected 5", preset.len());
    };

    // A consistent list of a prefix nothing lives under: the current revision.
    let list = store
        .list(
            "/second",
            &options(
                "",
                ResourceVersionMatch::Unset,
                SelectionPredicate::everything(),
                true,
            ),
        )
        .await
        .unwrap();
    let list_rv = list.metadata.resource_version.clone();
    let continue_rv: i64 = list_rv.parse().unwrap();
    let second_continuation =
        continue_token::encode_start_key("/second/foo", continue_rv, "/second/").unwrap();

    // The compaction writes a hidden key: the global revision moves while no object
    // changes, which a consistent list must reflect.
    backend.compact(&initial_rv).await;
    let current_rv = (continue_rv + 1).to_string();

    let name_is =
        |name: &str, limit: i64| field_predicate(&format!("metadata.name={name}"), limit, "");
    let name_is_from = |name: &str, limit: i64, start: &str| {
        field_predicate(
            &format!("metadata.name={name}"),
            limit,
            &continue_at(start, continue_rv),
        )
    };
    let lrv = list_rv.as_str();
    let irv = initial_rv.as_str();

    let cases = vec![
        ListCase::new("rejects invalid resource version", "/pods")
            .rv("abc")
            .fails(Outcome::BadRequest),
        ListCase::new("rejects resource version and continue token", "/pods")
            .pred(paging(1, &second_continuation))
            .rv("1")
            .fails(Outcome::BadRequest),
        ListCase::new("rejects resource version set too high", "/pods")
            .rv(&i64::MAX.to_string())
            .fails(Outcome::TooLarge),
        ListCase::new("test List on existing key", "/pods/first/").items(&[first_bar]),
        ListCase::new("test List on existing key with resource version set to 0", "/pods/first/")
            .one_of(&[&[], &[first_bar]])
            .rv("0"),
        ListCase::new(
            "test List on existing key with resource version set before first write, match=Exact",
            "/pods/first/",
        )
        .items(&[])
        .rv(irv)
        .matching(Exact)
        .echoes(irv),
        ListCase::new(
            "test List on existing key with resource version set to 0, match=NotOlderThan",
            "/pods/first/",
        )
        .one_of(&[&[], &[first_bar]])
        .rv("0")
        .matching(NotOlderThan),
        ListCase::new(
            "test List on existing key with resource version set before first write, match=NotOlderThan",
            "/pods/first/",
        )
        .one_of(&[&[], &[first_bar]])
        .rv(irv)
        .matching(NotOlderThan),
        ListCase::new(
            "test List on existing key with resource version set to current resource version",
            "/pods/first/",
        )
        .items(&[first_bar])
        .rv(lrv),
        ListCase::new(
            "test List on existing key with resource version set to current resource version, match=Exact",
            "/pods/first/",
        )
        .items(&[first_bar])
        .rv(lrv)
        .matching(Exact)
        .echoes(lrv),
        ListCase::new(
            "test List on existing key with resource version set to current resource version, match=NotOlderThan",
            "/pods/first/",
        )
        .items(&[first_bar])
        .rv(lrv)
        .matching(NotOlderThan),
        ListCase::new("test List on non-existing key", "/pods/non-existing/").items(&[]),
        ListCase::new("test List with pod name matching", "/pods/first/")
            .pred(field_predicate("metadata.name!=bar", 0, ""))
            .items(&[]),
        ListCase::new(
            "test List with pod name matching with resource version set to current resource version, match=NotOlderThan",
            "/pods/first/",
        )
        .pred(field_predicate("metadata.name!=bar", 0, ""))
        .items(&[])
        .rv(lrv)
        .matching(NotOlderThan),
        ListCase::new("test List with limit", "/pods/second/")
            .pred(paging(1, ""))
            .items(&[second_bar])
            .continues()
            .remaining(1),
        ListCase::new("test List with limit at current resource version", "/pods/second/")
            .pred(paging(1, ""))
            .items(&[second_bar])
            .continues()
            .remaining(1)
            .rv(lrv)
            .echoes(lrv),
        ListCase::new(
            "test List with limit at current resource version and match=Exact",
            "/pods/second/",
        )
        .pred(paging(1, ""))
        .items(&[second_bar])
        .continues()
        .remaining(1)
        .rv(lrv)
        .matching(Exact)
        .echoes(lrv),
        ListCase::new(
            "test List with limit at current resource version and match=NotOlderThan",
            "/pods/second/",
        )
        .pred(paging(1, ""))
        .items(&[second_bar])
        .continues()
        .remaining(1)
        .rv(lrv)
        .matching(NotOlderThan)
        .rv_not_older_than(lrv),
        ListCase::new("test List with limit at resource version 0", "/pods/second/")
            .pred(paging(1, ""))
            .items(&[second_bar])
            .continues()
            .remaining(1)
            .rv("0")
            .rv_not_older_than(lrv),
        ListCase::new(
            "test List with limit at resource version 0 match=NotOlderThan",
            "/pods/second/",
        )
        .pred(paging(1, ""))
        .items(&[second_bar])
        .continues()
        .remaining(1)
        .rv("0")
        .matching(NotOlderThan)
        .rv_not_older_than(lrv),
        ListCase::new(
            "test List with limit at resource version before first write and match=Exact",
            "/pods/second/",
        )
        .pred(paging(1, ""))
        .items(&[])
        .rv(irv)
        .matching(Exact)
        .echoes(irv),
        ListCase::new("test List with pregenerated continue token", "/pods/second/")
            .pred(paging(1, &second_continuation))
            .items(&[second_foo]),
        ListCase::new(
            "ignores resource version 0 for List with pregenerated continue token",
            "/pods/second/",
        )
        .pred(paging(1, &second_continuation))
        .rv("0")
        .items(&[second_foo]),
        ListCase::new(
            "test List with multiple levels of directories and expect flattened result",
            "/pods/second/",
        )
        .items(&[second_bar, second_foo]),
        ListCase::new(
            "test List with multiple levels of directories and expect flattened result with current resource version and match=NotOlderThan",
            "/pods/second/",
        )
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[second_bar, second_foo]),
        ListCase::new(
            "test List with filter returning only one item, ensure only a single page returned",
            "/pods",
        )
        .pred(name_is("barfoo", 1))
        .items(&[third_barfoo])
        .continues(),
        ListCase::new(
            "test List with filter returning only one item, ensure only a single page returned with current resource version and match=NotOlderThan",
            "/pods",
        )
        .pred(name_is("barfoo", 1))
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[third_barfoo])
        .continues(),
        ListCase::new(
            "test List with filter returning only one item, covers the entire list",
            "/pods",
        )
        .pred(name_is("barfoo", 2))
        .items(&[third_barfoo]),
        ListCase::new(
            "test List with filter returning only one item, covers the entire list with current resource version and match=NotOlderThan",
            "/pods",
        )
        .pred(name_is("barfoo", 2))
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[third_barfoo]),
        ListCase::new(
            "test List with filter returning only one item, covers the entire list, with resource version 0",
            "/pods",
        )
        .pred(name_is("barfoo", 2))
        .rv("0")
        .one_of(&[&[], &[third_barfoo]]),
        ListCase::new(
            "test List with filter returning two items, more pages possible",
            "/pods",
        )
        .pred(name_is("bar", 2))
        .continues()
        .items(&[first_bar, second_bar]),
        ListCase::new(
            "test List with filter returning two items, more pages possible with current resource version and match=NotOlderThan",
            "/pods",
        )
        .pred(name_is("bar", 2))
        .rv(lrv)
        .matching(NotOlderThan)
        .continues()
        .items(&[first_bar, second_bar]),
        ListCase::new("filter returns two items split across multiple pages", "/pods")
            .pred(name_is("foo", 2))
            .items(&[second_foo, third_foo]),
        ListCase::new(
            "filter returns two items split across multiple pages with current resource version and match=NotOlderThan",
            "/pods",
        )
        .pred(name_is("foo", 2))
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[second_foo, third_foo]),
        ListCase::new(
            "filter returns one item for last page, ends on last item, not full",
            "/pods",
        )
        .pred(name_is_from("foo", 2, "third/barfoo"))
        .items(&[third_foo]),
        ListCase::new(
            "filter returns one item for last page, starts on last item, full",
            "/pods",
        )
        .pred(name_is_from("foo", 1, "third/barfoo"))
        .items(&[third_foo]),
        ListCase::new(
            "filter returns one item for last page, starts on last item, partial page",
            "/pods",
        )
        .pred(name_is_from("foo", 2, "third/barfoo"))
        .items(&[third_foo]),
        ListCase::new(
            "filter returns two items, page size equal to total list size",
            "/pods",
        )
        .pred(name_is("foo", 5))
        .items(&[second_foo, third_foo]),
        ListCase::new(
            "filter returns two items, page size equal to total list size with current resource version and match=NotOlderThan",
            "/pods",
        )
        .pred(name_is("foo", 5))
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[second_foo, third_foo]),
        ListCase::new("filter returns one item, page size equal to total list size", "/pods")
            .pred(name_is("barfoo", 5))
            .items(&[third_barfoo]),
        ListCase::new(
            "filter returns one item, page size equal to total list size with current resource version and match=NotOlderThan",
            "/pods",
        )
        .pred(name_is("barfoo", 5))
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[third_barfoo]),
        ListCase::new("list all items", "/pods")
            .items(&[first_bar, second_bar, second_foo, third_barfoo, third_foo]),
        ListCase::new(
            "list all items with current resource version and match=NotOlderThan",
            "/pods",
        )
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[first_bar, second_bar, second_foo, third_barfoo, third_foo]),
        ListCase::new(
            "verify list returns updated version of object; filter returns one item, page size equal to total list size with current resource version and match=NotOlderThan",
            "/pods",
        )
        .pred(field_predicate("spec.nodeName=fakeNode", 5, ""))
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[first_bar]),
        ListCase::new(
            "verify list does not return deleted object; filter for deleted object, page size equal to total list size with current resource version and match=NotOlderThan",
            "/pods",
        )
        .pred(name_is("baz", 5))
        .rv(lrv)
        .matching(NotOlderThan)
        .items(&[]),
        ListCase::new("test consistent List", "/pods/empty")
            .rv("")
            .echoes(&current_rv)
            .items(&[]),
        ListCase::new("test non-consistent List", "/pods/empty")
            .rv("0")
            .rv_not_older_than(lrv)
            .items(&[]),
    ];

    let failures = join_all(cases.iter().map(|case| check_list_case(backend, case))).await;
    report("RunTestList", failures);

    // The two `match=Invalid` rows: an unknown match value is refused. The contract's
    // match is an enum, so the refusal happens where a request's value is parsed.
    for rv in ["0", irv] {
        let err = "Invalid".parse::<ResourceVersionMatch>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown ResourceVersionMatch value: Invalid",
            "match=Invalid at resourceVersion {rv}"
        );
    }
}

/// Runs one `RunTestList` row; an empty string when it passes, else what failed.
async fn check_list_case<B: Backend>(backend: &B, case: &ListCase) -> String {
    let name = case.name;
    let opts = options(&case.rv, case.rv_match, case.pred.clone(), true);
    let result = backend.store().list(case.prefix, &opts).await;
    let items = match (&case.outcome, result) {
        (Outcome::TooLarge, Err(err)) if is_too_large_timeout(&err) => return String::new(),
        (Outcome::BadRequest, Err(err)) if err.is_bad_request() => return String::new(),
        (Outcome::TooLarge | Outcome::BadRequest, Err(err)) => {
            return format!("{name}: expected {:?}, got {err}", case.outcome);
        }
        (Outcome::TooLarge | Outcome::BadRequest, Ok(out)) => {
            return format!(
                "{name}: expected {:?} but got a list: {out:?}",
                case.outcome
            );
        }
        (Outcome::Page(_), Err(err)) => return format!("{name}: GetList failed: {err}"),
        (Outcome::Page(items), Ok(out)) => (items, out),
    };
    let (expected, out) = items;
    let mut problems = Vec::new();
    if out.metadata.continue_token.is_empty() == case.expect_continue {
        problems.push(format!(
            "unexpected continue token: {:?}",
            out.metadata.continue_token
        ));
    }
    if let Some(want) = &case.expect_rv {
        if *want != out.metadata.resource_version {
            problems.push(format!(
                "resourceVersion in list response want={want}, got={}",
                out.metadata.resource_version
            ));
        }
    }
    if let Some(sentinel) = &case.expect_rv_not_older_than {
        if let Err(err) = check_not_older_than(&out.metadata.resource_version, sentinel) {
            problems.push(format!("resourceVersion in list response invalid: {err}"));
        }
    }
    if let Some(problem) = check_items(expected, &out) {
        problems.push(problem);
    }
    if out.metadata.remaining_item_count != case.remaining_item_count {
        problems.push(format!(
            "unexpected remainingItemCount: want {:?}, got {:?}",
            case.remaining_item_count, out.metadata.remaining_item_count
        ));
    }
    if problems.is_empty() {
        String::new()
    } else {
        format!("{name}: {}", problems.join("; "))
    }
}

/// Compares a list's items with what a row expects (sorted by key, as the reference
/// sorts its expectations).
pub(super) fn check_items(expected: &Items, out: &ObjectList<Pod>) -> Option<String> {
    match expected {
        Items::Exactly(want) => {
            let mut want = want.clone();
            want.sort_by_key(Pod::key);
            (out.items != want)
                .then(|| format!("incorrect list pods: want {:?}, got {:?}", want, out.items))
        }
        Items::OneOf(alternatives) => (!alternatives.contains(&out.items)).then(|| {
            format!(
                "incorrect list pods: {:?} differs from all of {alternatives:?}",
                out.items
            )
        }),
    }
}

/// A label selector, parsed (for cases that select on labels).
pub(super) fn label_predicate(label: &str, limit: i64) -> SelectionPredicate {
    SelectionPredicate {
        label: LabelSelector::parse(label).unwrap(),
        limit,
        ..SelectionPredicate::everything()
    }
}
