//! Create, get, guaranteed update and delete, at 1 and 16 concurrent callers; the same
//! runs serve the encryption and telemetry comparisons, whose two arms are both stores.
//!
//! - create: new keys in a fresh namespace (a transaction on "mod revision is 0"),
//!   cleared after the run;
//! - get: linearizable reads spread over a pool of 1,024 objects;
//! - guaranteed update: each caller bumps a counter in its own slice of the pool (so
//!   callers never conflict and every update writes);
//! - delete: removes objects created before the run, untimed.

use std::hint::black_box;
use std::sync::Arc;

use apistore_storage::{DeleteOptions, GetOptions, Storage, UpdateOptions};
use futures::future::BoxFuture;
use opentelemetry::trace::FutureExt as _;
use tracing::Dispatch;

use crate::bench::{Backend, Bench};
use crate::driver::{self, OpFn, Plan, Sample};
use crate::error::Result;
use crate::object::{BenchObject, etcd_key, object_name, store_key};
use crate::report::col;
use crate::stats::{Comparison, Metric, Section, Unit};

/// One operation of the CRUD workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Crud {
    /// Create new keys.
    Create,
    /// Read pool keys.
    Get,
    /// Guaranteed update of pool keys.
    Update,
    /// Delete pre-created keys.
    Delete,
}

impl Crud {
    /// The workload's name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Get => "get",
            Self::Update => "guaranteed update",
            Self::Delete => "delete",
        }
    }
}

/// One arm: a backend, and for the telemetry comparison a subscriber and a context.
#[derive(Clone)]
pub(crate) struct Arm {
    /// The arm's name in the report.
    pub(crate) name: &'static str,
    /// How it reaches etcd.
    pub(crate) backend: Backend,
    /// The tracing subscriber its callers run under, if any.
    pub(crate) dispatch: Option<Dispatch>,
    /// The OpenTelemetry context every call runs in, if any.
    pub(crate) context: Option<opentelemetry::Context>,
    /// The namespace of the pool its gets and updates read (written through this arm's
    /// transformer).
    pub(crate) pool: String,
}

impl Arm {
    /// An arm with no telemetry around its calls, reading `pool`.
    pub(crate) fn plain(name: &'static str, backend: Backend, pool: &str) -> Self {
        Self {
            name,
            backend,
            dispatch: None,
            context: None,
            pool: pool.to_owned(),
        }
    }
}

/// The name of a workload at a caller count.
pub(crate) fn workload_name(op: Crud, callers: usize) -> String {
    if callers == 1 {
        format!("{}, 1 caller", op.name())
    } else {
        format!("{}, {callers} callers", op.name())
    }
}

/// The names of the pool objects get and update read.
pub(crate) fn pool_names(size: u64) -> Vec<String> {
    (0..size).map(|i| object_name('p', 0, i)).collect()
}

impl Bench {
    /// Compares two arms on one operation: an untimed warm-up of each, then
    /// `settings.rounds` rounds of A then B.
    pub(crate) async fn compare_crud(
        &self,
        section: Section,
        op: Crud,
        callers: usize,
        arms: &[Arm; 2],
    ) -> Result<Comparison> {
        let workload = workload_name(op, callers);
        println!("  {workload}: {} against {}", arms[0].name, arms[1].name);
        let selected: Vec<usize> = match self.settings.single_arm {
            Some(arm) => vec![arm],
            None => vec![0, 1],
        };
        let deletes = self.settings.deletes_per_caller[usize::from(callers > 1)];
        let warmup = match op {
            Crud::Delete => Plan::Count(deletes.div_ceil(4)),
            _ => Plan::For(self.settings.warmup),
        };
        let timed = match op {
            Crud::Delete => Plan::Count(deletes),
            _ => Plan::For(self.settings.run),
        };
        let mut calls = [0; 2];
        for &arm in &selected {
            calls[arm] += self.run_crud(&arms[arm], op, callers, warmup).await?.ops;
        }
        let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..self.settings.rounds {
            for &arm in &selected {
                let sample = self.run_crud(&arms[arm], op, callers, timed).await?;
                calls[arm] += sample.ops;
                samples[arm].push(sample);
            }
        }
        // The call counts let a profile (valgrind) be read per call.
        println!(
            "    calls, warm-up included: {} {}, {} {}",
            arms[0].name, calls[0], arms[1].name, calls[1]
        );
        self.compact().await?;
        Ok(Comparison::new(
            section,
            workload,
            [arms[0].name, arms[1].name],
            sample_metrics(&samples[0], &samples[1]),
        ))
    }

    /// One run of one arm, with its untimed setup and cleanup.
    async fn run_crud(&self, arm: &Arm, op: Crud, callers: usize, plan: Plan) -> Result<Sample> {
        let namespace = match op {
            Crud::Create => self.fresh_namespace("create"),
            Crud::Delete => self.fresh_namespace("delete"),
            Crud::Get | Crud::Update => arm.pool.clone(),
        };
        if let (Crud::Delete, Plan::Count(per_caller)) = (op, plan) {
            let names = (0..callers)
                .flat_map(|caller| (0..per_caller).map(move |seq| object_name('d', caller, seq)))
                .collect();
            self.fill(&namespace, names, &Backend::Raw(Arc::clone(&self.raw)))
                .await?;
        }
        let call = crud_op(arm, op, &namespace, callers, self.settings.pool_size);
        let sample = driver::drive(&self.cpu, callers, plan, &call, arm.dispatch.as_ref()).await?;
        if matches!(op, Crud::Create | Crud::Delete) {
            self.clear(&namespace).await?;
        }
        Ok(sample)
    }
}

/// The five figures of a timed run.
pub(crate) fn sample_metrics(a: &[Sample], b: &[Sample]) -> Vec<Metric> {
    let metric = |name, unit, f: fn(&Sample) -> f64| {
        Metric::new(
            name,
            unit,
            a.iter().map(f).collect(),
            b.iter().map(f).collect(),
        )
    };
    vec![
        metric(col::OPS, Unit::PerSec, Sample::ops_per_sec),
        metric(col::P50, Unit::Seconds, |s| s.latency(0.5)),
        metric(col::P99, Unit::Seconds, |s| s.latency(0.99)),
        metric(col::CLIENT_CPU, Unit::CpuSeconds, Sample::client_cpu_per_op),
        metric(col::ETCD_CPU, Unit::CpuSeconds, Sample::etcd_cpu_per_op),
    ]
}

/// The call a caller makes: which key is derived from `(caller, seq)`, as above.
fn crud_op(arm: &Arm, op: Crud, namespace: &str, callers: usize, pool_size: u64) -> OpFn {
    let namespace: Arc<str> = namespace.into();
    let template = Bench::template(&namespace);
    let backend = arm.backend.clone();
    let context = arm.context.clone();
    let callers = callers as u64;
    let per_caller = (pool_size / callers).max(1);
    Arc::new(move |caller, seq| {
        let name = match op {
            Crud::Create => object_name('c', caller, seq),
            Crud::Delete => object_name('d', caller, seq),
            Crud::Get => object_name('p', 0, (caller as u64 + seq * callers) % pool_size),
            Crud::Update => object_name('p', 0, caller as u64 * per_caller + seq % per_caller),
        };
        let call = call(
            backend.clone(),
            op,
            Arc::clone(&namespace),
            name,
            Arc::clone(&template),
        );
        let boxed: BoxFuture<'static, Result<()>> = match &context {
            Some(context) => Box::pin(call.with_context(context.clone())),
            None => Box::pin(call),
        };
        boxed
    })
}

async fn call(
    backend: Backend,
    op: Crud,
    namespace: Arc<str>,
    name: String,
    template: Arc<BenchObject>,
) -> Result<()> {
    match backend {
        Backend::Store(store) => {
            let key = store_key(&namespace, &name);
            match op {
                Crud::Create => {
                    black_box(store.create(&key, template.named(name), 0).await?);
                }
                Crud::Get => {
                    black_box(store.get(&key, &GetOptions::default()).await?);
                }
                Crud::Update => {
                    let updated = store
                        .guaranteed_update(&key, UpdateOptions::default(), |mut object, _| {
                            object.spec.counter += 1;
                            Ok(object.into())
                        })
                        .await?;
                    black_box(updated);
                }
                Crud::Delete => {
                    black_box(store.delete(&key, DeleteOptions::default()).await?);
                }
            }
        }
        Backend::Raw(raw) => {
            let key = etcd_key(&namespace, &name);
            match op {
                Crud::Create => {
                    black_box(raw.create(&key, template.named(name)).await?);
                }
                Crud::Get => {
                    black_box(raw.get(&key).await?);
                }
                Crud::Update => {
                    let updated = raw
                        .guaranteed_update(&key, |mut object| {
                            object.spec.counter += 1;
                            object
                        })
                        .await?;
                    black_box(updated);
                }
                Crud::Delete => {
                    black_box(raw.delete(&key).await?);
                }
            }
        }
    }
    Ok(())
}
