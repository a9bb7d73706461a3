//! The scoped watch cases of kube-apiserver's `pkg/storage/testing/watcher_tests.go`:
//! `RunTestClusterScopedWatch` (keys `pods/<name>`) and `RunTestNamespaceScopedWatch`
//! (keys `pods/<ns>/<name>`), each a table of watches (a key, a field selector) and the
//! writes whose events each must see, run through one case runner.

use std::collections::HashMap;

use apistore_storage::ListOptions;

use super::watch::{
    Kind, active_watches, check_stop, expect_event, field_predicate, list_rv, put_pod, watch,
};
use super::{Backend, Pod};

/// `RunTestClusterScopedWatch`: keys `pods/<name>`; cluster-wide and single-name watches
/// with field selectors see exactly the transitions their predicate implies.
pub async fn run_test_cluster_scoped_watch<B: Backend>(backend: &B) {
    let pod = |name: &str| Pod::new("", name);
    let updated = |name: &str| updated_pod("", name);
    let assigned = |name: &str, node: &str| Pod::new("", name).on_node(node);
    let cases: Vec<(&str, &str, bool, &str, Steps)> = vec![
        (
            "cluster-wide watch, without field selector",
            "",
            true,
            "",
            vec![
                (pod("t1-foo1"), Some(Kind::Added)),
                (updated("t1-foo1"), Some(Kind::Modified)),
                (assigned("t1-foo2", "t1-bar1"), Some(Kind::Added)),
            ],
        ),
        (
            "cluster-wide watch, field selector with spec.nodeName",
            "",
            true,
            "spec.nodeName=t2-bar1",
            vec![
                (pod("t2-foo1"), None),
                (assigned("t2-foo1", "t2-bar1"), Some(Kind::Added)),
            ],
        ),
        (
            "cluster-wide watch, field selector with spec.nodeName to filter out watch",
            "",
            true,
            "spec.nodeName!=t3-bar1",
            vec![
                (pod("t3-foo1"), Some(Kind::Added)),
                (pod("t3-foo2"), Some(Kind::Added)),
                (updated("t3-foo1"), Some(Kind::Modified)),
                (assigned("t3-foo1", "t3-bar1"), Some(Kind::Deleted)),
            ],
        ),
        (
            "request with name, field selector with metadata.name",
            "t4-foo1",
            false,
            "metadata.name=t4-foo1",
            vec![
                (pod("t4-foo1"), Some(Kind::Added)),
                (pod("t4-foo2"), None),
                (updated("t4-foo1"), Some(Kind::Modified)),
                (updated("t4-foo2"), None),
            ],
        ),
        (
            "request with name, field selector with metadata.name and spec.nodeName",
            "t5-foo1",
            false,
            "metadata.name=t5-foo1,spec.nodeName=t5-bar1",
            vec![
                (pod("t5-foo1"), None),
                (pod("t5-foo2"), None),
                (updated("t5-foo1"), None),
                (updated("t5-foo2"), None),
                (assigned("t5-foo1", "t5-bar1"), Some(Kind::Added)),
            ],
        ),
        (
            "request with name, field selector with metadata.name, spec.nodeName filtering out",
            "t6-foo1",
            false,
            "spec.nodeName!=t6-bar1,metadata.name=t6-foo1",
            vec![
                (pod("t6-foo1"), Some(Kind::Added)),
                (pod("t6-foo2"), None),
                (updated("t6-foo1"), Some(Kind::Modified)),
                (assigned("t6-foo1", "t6-bar1"), Some(Kind::Deleted)),
                (assigned("t6-foo2", "t6-bar1"), None),
            ],
        ),
    ];
    for (name, requested_name, recursive, selector, steps) in cases {
        let watch_key = if requested_name.is_empty() {
            "/pods".to_owned()
        } else {
            format!("/pods/{requested_name}")
        };
        run_scoped_case(
            backend,
            name,
            &watch_key,
            recursive,
            selector,
            steps,
            |pod| format!("pods/{}", pod.metadata.name),
        )
        .await;
    }
}

/// `RunTestNamespaceScopedWatch`: keys `pods/<ns>/<name>`; watches of all pods, of a
/// namespace and of one pod, with namespace, name and node selectors.
pub async fn run_test_namespace_scoped_watch<B: Backend>(backend: &B) {
    let pod = |name: &str, ns: &str| Pod::new(ns, name);
    let updated = |name: &str, ns: &str| updated_pod(ns, name);
    let assigned = |name: &str, ns: &str, node: &str| Pod::new(ns, name).on_node(node);
    use Kind::{Added, Deleted, Modified};
    let cases: Vec<(&str, &str, &str, bool, &str, Steps)> = vec![
        (
            "t1: all namespaces, no selector",
            "",
            "",
            true,
            "",
            vec![
                (pod("t1-foo1", "t1-ns1"), Some(Added)),
                (pod("t1-foo2", "t1-ns2"), Some(Added)),
                (updated("t1-foo1", "t1-ns1"), Some(Modified)),
                (updated("t1-foo2", "t1-ns2"), Some(Modified)),
            ],
        ),
        (
            "t2: all namespaces, metadata.namespace",
            "",
            "",
            true,
            "metadata.namespace=t2-ns1",
            vec![
                (pod("t2-foo1", "t2-ns1"), Some(Added)),
                (pod("t2-foo1", "t2-ns2"), None),
                (updated("t2-foo1", "t2-ns1"), Some(Modified)),
                (updated("t2-foo1", "t2-ns2"), None),
            ],
        ),
        (
            "t3: all namespaces, spec.nodeName",
            "",
            "",
            true,
            "spec.nodeName=t3-bar1",
            vec![
                (pod("t3-foo1", "t3-ns1"), None),
                (pod("t3-foo2", "t3-ns2"), None),
                (assigned("t3-foo1", "t3-ns1", "t3-bar1"), Some(Added)),
                (assigned("t3-foo2", "t3-ns2", "t3-bar1"), Some(Added)),
            ],
        ),
        (
            "t4: all namespaces, spec.nodeName filtering out",
            "",
            "",
            true,
            "spec.nodeName!=t4-bar1",
            vec![
                (pod("t4-foo1", "t4-ns1"), Some(Added)),
                (pod("t4-foo2", "t4-ns1"), Some(Added)),
                (updated("t4-foo1", "t4-ns1"), Some(Modified)),
                (assigned("t4-foo1", "t4-ns1", "t4-bar1"), Some(Deleted)),
            ],
        ),
        (
            "t5: one namespace, no selector",
            "t5-ns1",
            "",
            true,
            "",
            vec![
                (pod("t5-foo1", "t5-ns1"), Some(Added)),
                (pod("t5-foo1", "t5-ns2"), None),
                (pod("t5-foo2", "t5-ns1"), Some(Added)),
                (updated("t5-foo1", "t5-ns1"), Some(Modified)),
                (updated("t5-foo1", "t5-ns2"), None),
            ],
        ),
        (
            "t6: one namespace, matching metadata.namespace",
            "t6-ns1",
            "",
            true,
            "metadata.namespace=t6-ns1",
            vec![
                (pod("t6-foo1", "t6-ns1"), Some(Added)),
                (pod("t6-foo1", "t6-ns2"), None),
                (updated("t6-foo1", "t6-ns1"), Some(Modified)),
            ],
        ),
        (
            "t7: one namespace, other metadata.namespace",
            "t7-ns1",
            "",
            true,
            "metadata.namespace=t7-ns2",
            vec![
                (pod("t7-foo1", "t7-ns1"), None),
                (pod("t7-foo1", "t7-ns2"), None),
                (updated("t7-foo1", "t7-ns1"), None),
                (updated("t7-foo1", "t7-ns2"), None),
            ],
        ),
        (
            "t8: one namespace, spec.nodeName",
            "t8-ns1",
            "",
            true,
            "spec.nodeName=t8-bar2",
            vec![
                (pod("t8-foo1", "t8-ns1"), None),
                (assigned("t8-foo1", "t8-ns1", "t8-bar1"), None),
                (assigned("t8-foo1", "t8-ns2", "t8-bar2"), None),
                (assigned("t8-foo1", "t8-ns1", "t8-bar2"), Some(Added)),
            ],
        ),
        (
            "t9: one namespace, spec.nodeName filtering out",
            "t9-ns2",
            "",
            true,
            "spec.nodeName!=t9-bar1",
            vec![
                (pod("t9-foo1", "t9-ns1"), None),
                (pod("t9-foo1", "t9-ns2"), Some(Added)),
                (assigned("t9-foo1", "t9-ns2", "t9-bar1"), Some(Deleted)),
                (assigned("t9-foo1", "t9-ns2", "t9-bar2"), Some(Added)),
            ],
        ),
        (
            "t10: all namespaces, metadata.name",
            "",
            "t10-foo1",
            true,
            "metadata.name=t10-foo1",
            vec![
                (pod("t10-foo1", "t10-ns1"), Some(Added)),
                (pod("t10-foo1", "t10-ns2"), Some(Added)),
                (pod("t10-foo2", "t10-ns1"), None),
                (updated("t10-foo1", "t10-ns1"), Some(Modified)),
                (assigned("t10-foo1", "t10-ns1", "t10-bar1"), Some(Modified)),
            ],
        ),
        (
            "t11: all namespaces, metadata.name and metadata.namespace",
            "",
            "t11-foo1",
            true,
            "metadata.name=t11-foo1,metadata.namespace=t11-ns1",
            vec![
                (pod("t11-foo1", "t11-ns1"), Some(Added)),
                (pod("t11-foo2", "t11-ns1"), None),
                (pod("t11-foo1", "t11-ns2"), None),
                (updated("t11-foo1", "t11-ns1"), Some(Modified)),
                (assigned("t11-foo1", "t11-ns1", "t11-bar1"), Some(Modified)),
            ],
        ),
        (
            "t12: all namespaces, metadata.name and spec.nodeName",
            "",
            "t12-foo1",
            true,
            "metadata.name=t12-foo1,spec.nodeName=t12-bar1",
            vec![
                (pod("t12-foo1", "t12-ns1"), None),
                (updated("t12-foo1", "t12-ns1"), None),
                (assigned("t12-foo1", "t12-ns1", "t12-bar1"), Some(Added)),
            ],
        ),
        (
            "t15: all namespaces, metadata.name, spec.nodeName filtering out",
            "",
            "t15-foo1",
            true,
            "spec.nodeName!=t15-bar1,metadata.name=t15-foo1",
            vec![
                (pod("t15-foo1", "t15-ns1"), Some(Added)),
                (pod("t15-foo2", "t15-ns1"), None),
                (updated("t15-foo1", "t15-ns1"), Some(Modified)),
                (assigned("t15-foo1", "t15-ns1", "t15-bar1"), Some(Deleted)),
                (assigned("t15-foo1", "t15-ns1", "t15-bar2"), Some(Added)),
            ],
        ),
        (
            "t16: one pod, metadata.name",
            "t16-ns1",
            "t16-foo1",
            false,
            "metadata.name=t16-foo1",
            vec![
                (pod("t16-foo1", "t16-ns1"), Some(Added)),
                (pod("t16-foo2", "t16-ns1"), None),
                (updated("t16-foo1", "t16-ns1"), Some(Modified)),
                (assigned("t16-foo1", "t16-ns1", "t16-bar1"), Some(Modified)),
            ],
        ),
        (
            "t17: one pod, metadata.name and metadata.namespace",
            "t17-ns1",
            "t17-foo2",
            false,
            "metadata.name=t17-foo2,metadata.namespace=t17-ns1",
            vec![
                (pod("t17-foo1", "t17-ns1"), None),
                (pod("t17-foo2", "t17-ns1"), Some(Added)),
                (updated("t17-foo1", "t17-ns1"), None),
                (assigned("t17-foo2", "t17-ns1", "t17-bar1"), Some(Modified)),
            ],
        ),
        (
            "t18: one pod, metadata.name, metadata.namespace and spec.nodeName",
            "t18-ns1",
            "t18-foo1",
            false,
            "metadata.name=t18-foo1,metadata.namespace=t18-ns1,spec.nodeName=t18-bar1",
            vec![
                (pod("t18-foo1", "t18-ns1"), None),
                (pod("t18-foo2", "t18-ns1"), None),
                (pod("t18-foo1", "t18-ns2"), None),
                (updated("t18-foo1", "t18-ns1"), None),
                (assigned("t18-foo1", "t18-ns1", "t18-bar1"), Some(Added)),
            ],
        ),
        (
            "t19: one pod, metadata.name, metadata.namespace, spec.nodeName filtering out",
            "t19-ns1",
            "t19-foo2",
            false,
            "spec.nodeName!=t19-bar1,metadata.name=t19-foo2,metadata.namespace=t19-ns1",
            vec![
                (pod("t19-foo1", "t19-ns1"), None),
                (pod("t19-foo2", "t19-ns2"), None),
                (pod("t19-foo2", "t19-ns1"), Some(Added)),
                (updated("t19-foo2", "t19-ns1"), Some(Modified)),
                (assigned("t19-foo2", "t19-ns1", "t19-bar1"), Some(Deleted)),
            ],
        ),
    ];
    for (name, namespace, requested_name, recursive, selector, steps) in cases {
        let mut watch_key = "/pods".to_owned();
        if !namespace.is_empty() {
            watch_key = format!("{watch_key}/{namespace}");
            if !requested_name.is_empty() {
                watch_key = format!("{watch_key}/{requested_name}");
            }
        }
        run_scoped_case(
            backend,
            name,
            &watch_key,
            recursive,
            selector,
            steps,
            |pod| format!("pods/{}/{}", pod.metadata.namespace, pod.metadata.name),
        )
        .await;
    }
}

/// The writes of a scoped watch case and the event each should bring.
type Steps = Vec<(Pod, Option<Kind>)>;

/// A pod "updated" the way the reference's `baseNamespacedPodUpdated` is (its status
/// phase set to Running): here an annotation, as the suite's pod has no status.
fn updated_pod(namespace: &str, name: &str) -> Pod {
    let mut pod = Pod::new(namespace, name);
    pod.metadata
        .annotations
        .insert("status.phase".to_owned(), "Running".to_owned());
    pod
}

/// One case of the scoped watch tests: a watch from a list's resourceVersion, writes,
/// and the events they should bring (Deleted with the last object at the new
/// revision), then the watch is stopped.
async fn run_scoped_case<B: Backend>(
    backend: &B,
    name: &str,
    watch_key: &str,
    recursive: bool,
    selector: &str,
    steps: Steps,
    key_of: impl Fn(&Pod) -> String,
) {
    let store = backend.store();
    let predicate = field_predicate(selector);
    let rv = list_rv(store, "/pods", &predicate, true).await;
    let before = active_watches(backend);
    let options = ListOptions {
        resource_version: rv,
        predicate,
        recursive,
        ..ListOptions::default()
    };
    let mut w = watch(store, watch_key, &options).await;
    let mut current: HashMap<String, Pod> = HashMap::new();
    for (pod, expect) in steps {
        let key = key_of(&pod);
        let out = put_pod(store, &key, pod).await;
        let expected = if expect == Some(Kind::Deleted) {
            let mut last = current.remove(&key).expect("a pod to see deleted");
            last.metadata.resource_version = out.metadata.resource_version.clone();
            last
        } else {
            current.insert(key, out.clone());
            out
        };
        if let Some(kind) = expect {
            let actual = expect_event(&mut w, name).await;
            assert_eq!(actual, kind.event(expected), "{name}");
        }
    }
    check_stop(backend, w, before).await;
}
