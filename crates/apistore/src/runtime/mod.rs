//! Controller runtime pieces in kube-rs's shape, over any [`Storage`](crate::Storage):
//! a [`watcher`](watcher::watcher) that lists, then watches from the list's
//! resourceVersion, resumes from the last one it saw, re-lists when the watch is
//! expired (410), and backs off on errors; and a [`reflector`](reflector::reflector) that
//! keeps a local copy of every object the watcher reports.
//!
//! ```no_run
//! use apistore::runtime::{reflector, watcher};
//! use apistore::ApiStore;
//! use futures::StreamExt;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let api = ApiStore::builder().endpoints(["http://127.0.0.1:2379"]).build().await?;
//! let pods = api.dynamic_store("pods")?;
//! let (cache, writer) = reflector::store();
//! let events = watcher::watcher(pods, "pods/default", watcher::Config::default().labels("app=web"));
//! let mut events = std::pin::pin!(reflector::reflector(writer, events));
//! while let Some(event) = events.next().await {
//!     match event? {
//!         watcher::Event::InitDone => println!("{} pods cached", cache.len()),
//!         watcher::Event::Apply(pod) => println!("{} changed", pod.metadata.name),
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod reflector;
pub mod watcher;
