//! Runs one timed run: `callers` concurrent tasks calling one operation back to back,
//! each timing every call, with the CPU time of the bench process and of etcd read
//! around the whole run.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tracing::Dispatch;
use tracing::instrument::WithSubscriber;

use crate::cpu::CpuMeter;
use crate::error::Result;

/// One call of the operation under test: `(caller, sequence number)`.
pub(crate) type OpFn = Arc<dyn Fn(usize, u64) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Wraps an async closure as an [`OpFn`].
pub(crate) fn op<F, Fut>(f: F) -> OpFn
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    Arc::new(move |caller, seq| Box::pin(f(caller, seq)))
}

/// How long each caller keeps calling.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Plan {
    /// Until this much time has passed since the run started.
    For(Duration),
    /// This many calls per caller.
    Count(u64),
}

/// What one run measured.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// Calls completed.
    pub(crate) ops: u64,
    /// From the first call's start to the last call's end.
    pub(crate) elapsed: Duration,
    /// Every call's latency in nanoseconds, sorted.
    pub(crate) latencies: Vec<u64>,
    /// CPU time of the bench process during the run.
    pub(crate) client_cpu: Duration,
    /// CPU time of etcd during the run.
    pub(crate) etcd_cpu: Duration,
}

impl Sample {
    /// Calls per second.
    pub(crate) fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The latency at quantile `q` (0..=1), in seconds.
    pub(crate) fn latency(&self, q: f64) -> f64 {
        if self.latencies.is_empty() {
            return 0.0;
        }
        let last = self.latencies.len() - 1;
        let index = ((last as f64) * q).round() as usize;
        self.latencies[index.min(last)] as f64 / 1e9
    }

    /// Client CPU seconds per call.
    pub(crate) fn client_cpu_per_op(&self) -> f64 {
        self.client_cpu.as_secs_f64() / self.ops.max(1) as f64
    }

    /// etcd CPU seconds per call.
    pub(crate) fn etcd_cpu_per_op(&self) -> f64 {
        self.etcd_cpu.as_secs_f64() / self.ops.max(1) as f64
    }
}

/// Runs `op` from `callers` tasks according to `plan`. With a `dispatch`, every task
/// runs with it as its tracing subscriber.
pub(crate) async fn drive(
    cpu: &CpuMeter,
    callers: usize,
    plan: Plan,
    op: &OpFn,
    dispatch: Option<&Dispatch>,
) -> Result<Sample> {
    let before = cpu.snapshot()?;
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(callers);
    for caller in 0..callers {
        let op = Arc::clone(op);
        let task = async move {
            let mut latencies = Vec::with_capacity(4096);
            let mut seq = 0;
            loop {
                let more = match plan {
                    Plan::For(duration) => start.elapsed() < duration,
                    Plan::Count(count) => seq < count,
                };
                if !more {
                    break;
                }
                let called = Instant::now();
                op(caller, seq).await?;
                latencies.push(u64::try_from(called.elapsed().as_nanos()).unwrap_or(u64::MAX));
                seq += 1;
            }
            Ok::<_, crate::error::BenchError>(latencies)
        };
        tasks.push(match dispatch {
            Some(dispatch) => tokio::spawn(task.with_subscriber(dispatch.clone())),
            None => tokio::spawn(task),
        });
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = start.elapsed();
    let used = cpu.snapshot()?.since(&before);
    latencies.sort_unstable();
    Ok(Sample {
        ops: latencies.len() as u64,
        elapsed,
        latencies,
        client_cpu: used.client,
        etcd_cpu: used.etcd,
    })
}
