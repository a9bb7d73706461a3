//! The apistore demo: what the storage layer does, end to end, against a real etcd.
//!
//! `cargo xtask demo` starts a throwaway etcd and runs this with `APISTORE_ENDPOINTS`
//! pointing at it. It creates, reads and updates objects (16 writers contending on one
//! object, conflicts retried), lists in pages with continue tokens, watches while
//! another task writes, encrypts at rest and rotates keys, and shows a few metrics.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apistore::layers::value::EncryptionConfig;
use apistore::prometheus::Registry;
use apistore::{
    ApiObject, ApiStore, DynamicObject, GetOptions, ListOptions, RewriteOptions, Storage,
    UpdateOptions, WatchEvent, rewrite_stale,
};
use futures::StreamExt;

type DemoResult<T = ()> = Result<T, Box<dyn Error + Send + Sync>>;

const KEY1: &str = "ZGVtby1rZXktb25lLWRlbW8ta2V5LW9uZS1kZW1vLWs="; // 32 bytes
const KEY2: &str = "ZGVtby1rZXktdHdvLWRlbW8ta2V5LXR3by1kZW1vLWs="; // 32 bytes

#[tokio::main]
async fn main() {
    if let Err(err) = run().await {
        eprintln!("demo failed: {err}");
        std::process::exit(1);
    }
}

async fn run() -> DemoResult {
    let endpoints = std::env::var("APISTORE_ENDPOINTS")
        .map_err(|_| "APISTORE_ENDPOINTS is not set; run this through `cargo xtask demo`")?;
    let registry = Registry::new();
    let api = ApiStore::builder()
        .endpoints(endpoints.split(','))
        .metrics_registry(&registry)?
        .encryption_config(encryption(&[("key1", KEY1)])?)
        .build()
        .await?;
    println!("apistore demo: etcd at {endpoints}, keys under /registry/\n");

    crud(&api).await?;
    contention(&api).await?;
    paging(&api).await?;
    watching(&api).await?;
    encryption_at_rest(&api, &endpoints, &registry).await?;
    metrics(&registry);
    println!("\ndone.");
    Ok(())
}

fn heading(title: &str) {
    println!("== {title}");
}

async fn crud(api: &ApiStore) -> DemoResult {
    heading("create, read, update, delete");
    let store = api.dynamic_store("configmaps")?;
    let cm = DynamicObject::new("v1", "ConfigMap", "settings")
        .within("default")
        .with("data", serde_json::json!({"color": "blue"}));
    let created = store.create("configmaps/default/settings", cm, 0).await?;
    println!(
        "created configmaps/default/settings at resourceVersion {}",
        created.resource_version()
    );
    let read = store
        .get("configmaps/default/settings", &GetOptions::default())
        .await?;
    println!("read it back: data = {}", read.data["data"]);
    let updated = store
        .guaranteed_update(
            "configmaps/default/settings",
            UpdateOptions::default(),
            |mut cm, _| {
                cm.data["data"]["color"] = "green".into();
                Ok(cm.into())
            },
        )
        .await?;
    println!(
        "updated color to green: resourceVersion {} -> {}",
        created.resource_version(),
        updated.resource_version()
    );
    let mut again = created.clone();
    again.metadata.resource_version.clear();
    let err = store
        .create("configmaps/default/settings", again, 0)
        .await
        .err()
        .ok_or("a second create should fail")?;
    println!("creating it again fails: {}: {err}", err.status().reason);
    let stale = apistore::Preconditions::resource_version(created.resource_version());
    let err = store
        .delete(
            "configmaps/default/settings",
            apistore::DeleteOptions {
                preconditions: Some(stale),
                ..Default::default()
            },
        )
        .await
        .err()
        .ok_or("a delete with a stale precondition should fail")?;
    println!(
        "deleting with a stale resourceVersion precondition: {}",
        err.status().reason
    );
    println!();
    Ok(())
}

async fn contention(api: &ApiStore) -> DemoResult {
    heading("16 writers, one counter, no lost update");
    let store = api.dynamic_store("configmaps")?;
    let counter = DynamicObject::new("v1", "ConfigMap", "counter")
        .within("default")
        .with("data", serde_json::json!({"count": "0"}));
    store
        .create("configmaps/default/counter", counter, 0)
        .await?;
    let attempts = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let store = store.clone();
        let attempts = Arc::clone(&attempts);
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                store
                    .guaranteed_update(
                        "configmaps/default/counter",
                        UpdateOptions::default(),
                        |mut cm, _| {
                            attempts.fetch_add(1, Ordering::Relaxed);
                            let count: u64 = cm.data["data"]["count"]
                                .as_str()
                                .unwrap_or("0")
                                .parse()
                                .unwrap_or(0);
                            cm.data["data"]["count"] = (count + 1).to_string().into();
                            Ok(cm.into())
                        },
                    )
                    .await?;
            }
            Ok::<_, apistore::StorageError>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let cm = store
        .get("configmaps/default/counter", &GetOptions::default())
        .await?;
    let tries = attempts.load(Ordering::Relaxed);
    println!(
        "400 increments by 16 tasks: count = {}, {} update attempts ({} conflicts retried)\n",
        cm.data["data"]["count"],
        tries,
        tries.saturating_sub(400)
    );
    Ok(())
}

async fn paging(api: &ApiStore) -> DemoResult {
    heading("list in pages with continue tokens");
    let store = api.dynamic_store("pods")?;
    for i in 0..25 {
        let pod = DynamicObject::new("v1", "Pod", &format!("web-{i:02}"))
            .within("default")
            .with(
                "spec",
                serde_json::json!({"nodeName": format!("node-{}", i % 3)}),
            );
        let mut pod = pod;
        pod.metadata
            .labels
            .insert("app".into(), if i % 5 == 0 { "db" } else { "web" }.into());
        store
            .create(&format!("pods/default/web-{i:02}"), pod, 0)
            .await?;
    }
    let mut options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    options.predicate.limit = 10;
    let mut page = 1;
    loop {
        let list = store.list("pods", &options).await?;
        let names: Vec<&str> = list.items.iter().map(|p| p.name()).collect();
        println!(
            "page {page}: {} items ({} .. {}), resourceVersion {}, remaining {:?}",
            names.len(),
            names.first().unwrap_or(&"-"),
            names.last().unwrap_or(&"-"),
            list.metadata.resource_version,
            list.metadata.remaining_item_count
        );
        if list.metadata.continue_token.is_empty() {
            break;
        }
        let token = list.metadata.continue_token;
        println!("   continue: {}…", &token[..token.len().min(40)]);
        options.predicate.continue_token = token;
        page += 1;
    }
    options.predicate = Default::default();
    options.predicate.label = apistore::LabelSelector::parse("app=db")?;
    let dbs = store.list("pods", &options).await?;
    println!("label selector app=db: {} pods\n", dbs.items.len());
    Ok(())
}

async fn watching(api: &ApiStore) -> DemoResult {
    heading("watch while another task writes");
    let store = api.dynamic_store("pods")?;
    let current = store
        .list(
            "pods",
            &ListOptions {
                recursive: true,
                ..ListOptions::default()
            },
        )
        .await?;
    let options = ListOptions {
        resource_version: current.metadata.resource_version.clone(),
        recursive: true,
        ..ListOptions::default()
    };
    let mut events = store.watch("pods/default", &options).await?;
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let pod = DynamicObject::new("v1", "Pod", "watched").within("default");
            store.create("pods/default/watched", pod, 0).await?;
            store
                .guaranteed_update(
                    "pods/default/watched",
                    UpdateOptions::default(),
                    |mut p, _| {
                        p.metadata.labels.insert("phase".into(), "running".into());
                        Ok(p.into())
                    },
                )
                .await?;
            store
                .delete("pods/default/watched", Default::default())
                .await?;
            Ok::<_, apistore::StorageError>(())
        })
    };
    for _ in 0..3 {
        match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
            Ok(Some(WatchEvent::Error(status))) => return Err(status.message.into()),
            Ok(Some(event)) => {
                let object = event.object().ok_or("event without object")?;
                println!(
                    "{:<8} {} at resourceVersion {}",
                    event.type_name(),
                    object.name(),
                    object.resource_version()
                );
            }
            Ok(None) => return Err("watch ended early".into()),
            Err(_) => return Err("no watch event within 10s".into()),
        }
    }
    writer.await??;
    println!();
    Ok(())
}

async fn encryption_at_rest(api: &ApiStore, endpoints: &str, registry: &Registry) -> DemoResult {
    heading("encryption at rest, key rotation");
    let secrets = api.dynamic_store("secrets")?;
    let secret = DynamicObject::new("v1", "Secret", "db-password")
        .within("default")
        .with("data", serde_json::json!({"password": "aHVudGVyMg=="}));
    secrets
        .create("secrets/default/db-password", secret, 0)
        .await?;
    let etcd_key = secrets.prepare_key("secrets/default/db-password")?;
    let mut raw =
        etcd_client::Client::connect(endpoints.split(',').collect::<Vec<_>>(), None).await?;
    let stored = raw.get(etcd_key.as_str(), None).await?;
    let value = stored
        .kvs()
        .first()
        .ok_or("secret not in etcd")?
        .value()
        .to_vec();
    println!("in etcd at {etcd_key}:");
    println!("   {}", printable(&value));
    let read = secrets
        .get("secrets/default/db-password", &GetOptions::default())
        .await?;
    println!("through apistore: data = {}", read.data["data"]);

    // Rotate: key2 first, key1 still readable; rewrite everything; key1 can go.
    let rotated = ApiStore::builder()
        .endpoints(endpoints.split(','))
        .metrics_registry(registry)?
        .encryption_config(encryption(&[("key2", KEY2), ("key1", KEY1)])?)
        .build()
        .await?;
    let secrets = rotated.dynamic_store("secrets")?;
    let summary = rewrite_stale(
        &secrets,
        "secrets",
        &RewriteOptions {
            concurrency: 4,
            ..RewriteOptions::default()
        },
        |_, _| {},
    )
    .await?;
    println!(
        "rotated to key2 and rewrote: scanned {}, rewritten {}, failed {}",
        summary.scanned,
        summary.rewritten,
        summary.failed.len()
    );
    let stored = raw.get(etcd_key.as_str(), None).await?;
    let value = stored
        .kvs()
        .first()
        .ok_or("secret not in etcd")?
        .value()
        .to_vec();
    println!("in etcd now:\n   {}\n", printable(&value));
    Ok(())
}

fn metrics(registry: &Registry) {
    heading("a few metrics (kube-apiserver's names)");
    let text = apistore::layers::telemetry::encode_text(registry);
    for line in text.lines().filter(|l| {
        !l.starts_with('#')
            && (l.starts_with("etcd_requests_total")
                || l.starts_with("apiserver_storage_list_returned_objects_total")
                || l.starts_with("apiserver_storage_transformation_operations_total"))
    }) {
        println!("   {line}");
    }
}

fn encryption(keys: &[(&str, &str)]) -> DemoResult<EncryptionConfig> {
    let keys: String = keys
        .iter()
        .map(|(name, secret)| {
            format!("            - name: {name}\n              secret: {secret}\n")
        })
        .collect();
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - aesgcm:\n          keys:\n{keys}      - identity: {{}}\n"
    );
    Ok(EncryptionConfig::parse(&text)?)
}

/// The stored bytes with non-printable ones as dots, cut to a line.
fn printable(value: &[u8]) -> String {
    let text: String = value
        .iter()
        .take(72)
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
        .collect();
    format!("{text}… ({} bytes)", value.len())
}
