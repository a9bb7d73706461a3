//! A controller-style loop on the runtime watcher and reflector: list, then watch from
//! the list's resourceVersion, resume from the last one seen, re-list on 410, back off on
//! errors — none of which the controller writes itself.
//!
//! Run with `APISTORE_ENDPOINTS=http://127.0.0.1:2379 cargo run -p apistore --example controller`.

use std::time::Duration;

use apistore::runtime::watcher::{Config, Event};
use apistore::runtime::{reflector, watcher};
use apistore::{ApiStore, DynamicObject, Storage};
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoints =
        std::env::var("APISTORE_ENDPOINTS").unwrap_or_else(|_| "http://127.0.0.1:2379".into());
    let prefix = format!("/examples-{}", std::process::id());
    let api = ApiStore::builder()
        .endpoints(endpoints.split(','))
        .prefix(&prefix)
        .build()
        .await?;
    let jobs = api.dynamic_store("jobs.batch")?;

    // Something else writes while the controller runs.
    let writer = {
        let jobs = jobs.clone();
        tokio::spawn(async move {
            for i in 0..10 {
                let job =
                    DynamicObject::new("batch/v1", "Job", &format!("job-{i}")).within("default");
                jobs.create(&format!("jobs/default/job-{i}"), job, 0)
                    .await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok::<_, apistore::StorageError>(())
        })
    };

    // The controller's cache, kept by the reflector.
    let (cache, cache_writer) = reflector::store::<DynamicObject>();
    let events = watcher::watcher(jobs, "jobs/default", Config::default());
    let mut events = Box::pin(reflector::reflector(cache_writer, events));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while cache.len() < 10 {
        let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.next()).await else {
            break;
        };
        match event {
            Ok(Event::InitDone) => println!("listed {} jobs", cache.len()),
            Ok(Event::Apply(job)) => println!(
                "  saw {} at {}",
                job.metadata.name, job.metadata.resource_version
            ),
            Ok(_) => {}
            // The watcher retries by itself; a controller only logs.
            Err(err) => println!("  watch error, retrying: {err}"),
        }
    }
    writer.await??;
    assert_eq!(cache.len(), 10, "the controller saw every job");
    println!("controller cache holds {} jobs", cache.len());
    Ok(())
}
