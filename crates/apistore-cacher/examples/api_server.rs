//! An API-server-shaped program: configmaps kept in etcd, lists and watches served from
//! the watch cache over HTTP, the way kube-apiserver serves them.
//!
//! ```text
//! APISTORE_ENDPOINTS=http://127.0.0.1:2379 cargo run -p apistore-cacher --example api_server
//! curl 'http://127.0.0.1:8001/api/v1/configmaps?resourceVersion=0'
//! curl 'http://127.0.0.1:8001/api/v1/namespaces/default/configmaps?limit=2&resourceVersion=5'
//! curl -N 'http://127.0.0.1:8001/api/v1/configmaps?watch=true&resourceVersion=0'
//! curl 'http://127.0.0.1:8001/metrics'
//! ```
//!
//! With `APISTORE_EXAMPLE_ONESHOT=1` it writes a few configmaps, asks itself for one list
//! and one watch over HTTP, prints what came back and exits (a smoke test).
//! `APISTORE_LISTEN` sets the address (default `127.0.0.1:8001`).

use std::collections::HashMap;
use std::error::Error;
use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, StoreConfig};
use apistore_storage::{DynamicObject, ListOptions, ResourceVersionMatch, Storage};
use futures::StreamExt as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

type AnyResult<T = ()> = Result<T, Box<dyn Error + Send + Sync>>;
type ConfigMaps = Cacher<Etcd3Store<DynamicObject>>;

#[tokio::main]
async fn main() {
    if let Err(err) = run().await {
        eprintln!("api_server: {err}");
        std::process::exit(1);
    }
}

async fn run() -> AnyResult {
    let endpoints = std::env::var("APISTORE_ENDPOINTS")
        .map_err(|_| "APISTORE_ENDPOINTS is not set (e.g. http://127.0.0.1:2379)")?;
    let listen = std::env::var("APISTORE_LISTEN").unwrap_or_else(|_| "127.0.0.1:8001".to_owned());
    let client = EtcdClient::connect(&ClientConfig::new(endpoints.split(','))).await?;
    let store: Etcd3Store<DynamicObject> =
        Etcd3Store::new(client, StoreConfig::for_resource("configmaps"));

    // The cache's configuration: the key layout of the store's callers, consistent
    // reads from the cache only where etcd answers progress requests correctly.
    let registry = prometheus::Registry::new();
    let mut config = CacherConfig::new("/configmaps", "configmaps");
    config.consistent_reads_from_cache = store
        .check_request_watch_progress_support()
        .await
        .unwrap_or(false);
    config.metrics = Some(CacherMetrics::register(&registry)?);
    let configmaps = Cacher::new(store, config);
    configmaps.wait_until_ready().await?;

    let listener = TcpListener::bind(&listen).await?;
    println!(
        "serving configmaps from the watch cache (revision {}) on http://{listen}",
        configmaps.resource_version()
    );
    let oneshot = std::env::var("APISTORE_EXAMPLE_ONESHOT").is_ok_and(|v| v == "1");
    let server = tokio::spawn(serve(listener, configmaps.clone(), registry));
    if oneshot {
        smoke_test(&configmaps, &listen).await?;
        server.abort();
        return Ok(());
    }
    server.await?;
    Ok(())
}

async fn serve(listener: TcpListener, configmaps: ConfigMaps, registry: prometheus::Registry) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let configmaps = configmaps.clone();
        let registry = registry.clone();
        tokio::spawn(async move {
            if let Err(err) = handle(stream, &configmaps, &registry).await {
                eprintln!("request failed: {err}");
            }
        });
    }
}

/// One HTTP/1.1 request: the path and query of its request line.
async fn handle(
    stream: TcpStream,
    configmaps: &ConfigMaps,
    registry: &prometheus::Registry,
) -> AnyResult {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).await?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).await? == 0 || header == "\r\n" {
            break;
        }
    }
    let mut stream = reader.into_inner();
    let target = request_line.split_whitespace().nth(1).unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let params: HashMap<&str, &str> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .collect();
    if path == "/metrics" {
        let body = prometheus::TextEncoder::new().encode_to_string(&registry.gather())?;
        return respond(&mut stream, 200, &body).await;
    }
    let Some(key) = key_of(path) else {
        return respond(&mut stream, 404, r#"{"kind":"Status","code":404}"#).await;
    };
    let mut options = ListOptions::prefix().at(
        params.get("resourceVersion").copied().unwrap_or(""),
        ResourceVersionMatch::Unset,
    );
    if let Some(selector) = params.get("labelSelector") {
        options = options.labels(selector)?;
    }
    if let Some(limit) = params.get("limit") {
        options = options.limit(limit.parse()?);
    }
    if let Some(token) = params.get("continue") {
        options = options.continue_from(*token);
    }
    if params.get("watch") == Some(&"true") {
        options.predicate.allow_watch_bookmarks =
            params.get("allowWatchBookmarks") == Some(&"true");
        let mut events = match configmaps.watch(&key, &options).await {
            Ok(events) => events,
            Err(err) => {
                let status = err.status();
                return respond(&mut stream, status.code, &serde_json::to_string(&status)?).await;
            }
        };
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await?;
        while let Some(event) = events.next().await {
            let mut line = serde_json::to_vec(&event)?;
            line.push(b'\n');
            stream
                .write_all(format!("{:x}\r\n", line.len()).as_bytes())
                .await?;
            stream.write_all(&line).await?;
            stream.write_all(b"\r\n").await?;
        }
        stream.write_all(b"0\r\n\r\n").await?;
        return Ok(());
    }
    match configmaps.list(&key, &options).await {
        Ok(list) => respond(&mut stream, 200, &serde_json::to_string(&list)?).await,
        Err(err) => {
            let status = err.status();
            respond(&mut stream, status.code, &serde_json::to_string(&status)?).await
        }
    }
}

/// `/api/v1/configmaps` and `/api/v1/namespaces/<ns>/configmaps` as store keys.
fn key_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/api/v1/")?;
    if rest == "configmaps" {
        return Some("/configmaps".to_owned());
    }
    let namespace = rest
        .strip_prefix("namespaces/")?
        .strip_suffix("/configmaps")?;
    (!namespace.is_empty() && !namespace.contains('/')).then(|| format!("/configmaps/{namespace}"))
}

async fn respond(stream: &mut TcpStream, code: u16, body: &str) -> AnyResult {
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        if code == 200 { "OK" } else { "Error" },
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    Ok(())
}

/// Writes three configmaps (through the cache: writes pass to etcd), lists them over
/// HTTP from the cache, and reads the first events of a watch over HTTP.
async fn smoke_test(configmaps: &ConfigMaps, listen: &str) -> AnyResult {
    let namespace = format!("example-{}", std::process::id());
    let mut last = 0;
    for name in ["a", "b", "c"] {
        let cm = DynamicObject::new("v1", "ConfigMap", name)
            .within(&namespace)
            .with("data", serde_json::json!({"name": name}));
        let created = configmaps
            .create(&format!("/configmaps/{namespace}/{name}"), cm, 0)
            .await?;
        last = created.metadata.resource_version.parse()?;
    }
    let body = get(
        listen,
        &format!("/api/v1/namespaces/{namespace}/configmaps?resourceVersion={last}"),
    )
    .await?;
    println!("list from the cache: {body}");
    let list: serde_json::Value = serde_json::from_str(body.trim())?;
    let items = list["items"].as_array().map_or(0, Vec::len);
    if items != 3 {
        return Err(format!("expected 3 configmaps, listed {items}").into());
    }
    let mut watch = TcpStream::connect(listen).await?;
    let request = format!(
        "GET /api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n"
    );
    watch.write_all(request.as_bytes()).await?;
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    while received.iter().filter(|&&b| b == b'\n').count() < 8 {
        let n = tokio::time::timeout(Duration::from_secs(10), watch.read(&mut buffer)).await??;
        if n == 0 {
            break;
        }
        received.extend_from_slice(&buffer[..n]);
    }
    let text = String::from_utf8_lossy(&received);
    let added = text.matches(r#""type":"ADDED""#).count();
    println!("watch from the cache (resourceVersion 0): {added} ADDED events");
    if added != 3 {
        return Err(format!("expected 3 ADDED events, got: {text}").into());
    }
    for name in ["a", "b", "c"] {
        configmaps
            .delete(
                &format!("/configmaps/{namespace}/{name}"),
                Default::default(),
            )
            .await?;
    }
    Ok(())
}

async fn get(listen: &str, target: &str) -> AnyResult<String> {
    let mut stream = TcpStream::connect(listen).await?;
    stream
        .write_all(
            format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    Ok(body.to_owned())
}
