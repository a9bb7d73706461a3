//! Lists of 10,000 objects: whole, and as a walk of pages of 500 (each page dropped
//! before the next is asked for, as a client streaming pages does). Time per list,
//! keys per second, CPU per list, and the peak bytes allocated during one list.

use std::hint::black_box;
use std::sync::Arc;

use apistore_etcd3::prefix_range_end;
use apistore_storage::{ListOptions, Storage};
use etcd_client::GetOptions;

use crate::alloc::Window;
use crate::bench::{Backend, Bench};
use crate::driver::{self, Plan};
use crate::error::{BenchError, Result};
use crate::object::{etcd_namespace_prefix, object_name, store_namespace_key};
use crate::report::col;
use crate::stats::{Comparison, Metric, Section, Unit};

const NAMESPACE: &str = "list";
const ARMS: [&str; 2] = ["apistore", "raw"];

/// One arm's figures in one round.
#[derive(Debug, Clone, Copy)]
struct Round {
    time: f64,
    keys_per_sec: f64,
    peak: f64,
    peak_ratio: f64,
    client_cpu: f64,
    etcd_cpu: f64,
}

impl Bench {
    /// Fills the list namespace, compares both list shapes, and clears it.
    pub(crate) async fn list_section(&self) -> Result<Vec<Comparison>> {
        let objects = self.settings.list_objects;
        println!("  filling {objects} objects to list");
        let names = (0..objects).map(|i| object_name('l', 0, i)).collect();
        self.fill(NAMESPACE, names, &Backend::Raw(Arc::clone(&self.raw)))
            .await?;
        let page = self.settings.list_page;
        let (whole_bytes, _) = self.bytes_listed(0).await?;
        let (_, page_bytes) = self.bytes_listed(page).await?;
        let mut comparisons = Vec::new();
        for (workload, limit, bytes) in [
            ("whole", 0, whole_bytes),
            ("pages of 500", page, page_bytes),
        ] {
            if self.settings.selected(&format!("list {workload}")) {
                comparisons.push(match self.compare_list(workload, limit, bytes).await {
                    Ok(comparison) => comparison,
                    Err(err) => {
                        println!("  list {workload}: not available ({err})");
                        Comparison::unavailable(Section::List, workload, ARMS, err.to_string())
                    }
                });
            }
        }
        self.clear(NAMESPACE).await?;
        self.compact().await?;
        Ok(comparisons)
    }

    /// The bytes etcd returns for the whole list, and for its largest page of `limit`.
    async fn bytes_listed(&self, limit: i64) -> Result<(u64, u64)> {
        let prefix = etcd_namespace_prefix(NAMESPACE);
        let mut kv = self.raw.kv();
        let mut start = prefix.clone().into_bytes();
        let (mut total, mut largest, mut rev) = (0, 0, 0);
        loop {
            let mut options = GetOptions::new().with_range(prefix_range_end(prefix.as_bytes()));
            if limit > 0 {
                options = options.with_limit(limit);
            }
            if rev != 0 {
                options = options.with_revision(rev);
            }
            let response = kv.get(start.clone(), Some(options)).await?;
            rev = response
                .header()
                .map_or(0, etcd_client::ResponseHeader::revision);
            let page: u64 = response
                .kvs()
                .iter()
                .map(|kv| (kv.key().len() + kv.value().len()) as u64)
                .sum();
            total += page;
            largest = largest.max(page);
            match response.kvs().last() {
                Some(last) if response.more() && limit > 0 => {
                    start = last.key().to_vec();
                    start.push(0);
                }
                _ => return Ok((total, largest)),
            }
        }
    }

    async fn compare_list(
        &self,
        workload: &str,
        limit: i64,
        bytes_listed: u64,
    ) -> Result<Comparison> {
        println!("  list {workload}: apistore against raw");
        let arms = [
            Backend::Store(Arc::clone(&self.store)),
            Backend::Raw(Arc::clone(&self.raw)),
        ];
        let selected: Vec<usize> = match self.settings.single_arm {
            Some(arm) => vec![arm],
            None => vec![0, 1],
        };
        for &arm in &selected {
            self.list_once(&arms[arm], limit)
                .await
                .map_err(|err| BenchError::Invalid(format!("{} returned: {err}", ARMS[arm])))?;
        }
        let mut rounds: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..self.settings.rounds {
            for &arm in &selected {
                let round = self.list_round(&arms[arm], limit, bytes_listed).await?;
                rounds[arm].push(round);
            }
        }
        let metric = |name, unit, f: fn(&Round) -> f64| {
            Metric::new(
                name,
                unit,
                rounds[0].iter().map(f).collect(),
                rounds[1].iter().map(f).collect(),
            )
        };
        Ok(Comparison::new(
            Section::List,
            workload,
            ARMS,
            vec![
                metric(col::TIME, Unit::Seconds, |r| r.time),
                metric(col::KEYS, Unit::PerSec, |r| r.keys_per_sec),
                metric(col::PEAK, Unit::Bytes, |r| r.peak),
                metric(col::PEAK_RATIO, Unit::Ratio, |r| r.peak_ratio),
                metric("client CPU/list", Unit::CpuSeconds, |r| r.client_cpu),
                metric("etcd CPU/list", Unit::CpuSeconds, |r| r.etcd_cpu),
            ],
        ))
    }

    /// Timed lists, then one more with the allocation counter on.
    async fn list_round(&self, backend: &Backend, limit: i64, bytes_listed: u64) -> Result<Round> {
        let objects = self.settings.list_objects;
        let backend_for_op = backend.clone();
        let op = driver::op(move |_, _| {
            let backend = backend_for_op.clone();
            async move {
                let listed = list(&backend, limit).await?;
                if listed as u64 != objects {
                    return Err(BenchError::Invalid(format!(
                        "listed {listed} objects, expected {objects}"
                    )));
                }
                Ok(())
            }
        });
        let sample = driver::drive(
            &self.cpu,
            1,
            Plan::Count(self.settings.list_repeats),
            &op,
            None,
        )
        .await?;
        let window = Window::open();
        self.list_once(backend, limit).await?;
        let counted = window.close();
        let time = sample.latency(0.5);
        Ok(Round {
            time,
            keys_per_sec: objects as f64 / time.max(1e-9),
            peak: counted.peak as f64,
            peak_ratio: counted.peak as f64 / bytes_listed.max(1) as f64,
            client_cpu: sample.client_cpu_per_op(),
            etcd_cpu: sample.etcd_cpu_per_op(),
        })
    }

    async fn list_once(&self, backend: &Backend, limit: i64) -> Result<()> {
        black_box(list(backend, limit).await?);
        Ok(())
    }
}

/// Lists the namespace through `backend` in pages of `limit` (0: one call), dropping
/// each page before asking for the next; returns how many objects it saw.
async fn list(backend: &Backend, limit: i64) -> Result<usize> {
    match backend {
        Backend::Store(store) => {
            let key = store_namespace_key(NAMESPACE);
            let mut options = ListOptions {
                recursive: true,
                ..ListOptions::default()
            };
            options.predicate.limit = limit;
            let mut listed = 0;
            loop {
                let page = store.list(&key, &options).await?;
                listed += page.items.len();
                black_box(&page.items);
                if page.metadata.continue_token.is_empty() {
                    return Ok(listed);
                }
                options.predicate.continue_token = page.metadata.continue_token;
            }
        }
        Backend::Raw(raw) => {
            let prefix = etcd_namespace_prefix(NAMESPACE);
            raw.list(&prefix, limit, |items| {
                black_box(items);
            })
            .await
        }
    }
}
