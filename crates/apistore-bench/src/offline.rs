//! Offline forensics at scale: the command reading an etcd snapshot file, against etcd's
//! own `etcdutl snapshot status` on the same file, in the same run.
//!
//! An etcd of the section's own is filled with a realistic mix (half Pods and a quarter
//! ConfigMaps, as kube's protobuf; a quarter Secrets, protobuf encrypted with AES-GCM),
//! one Pod in twenty updated and a hundredth of the ConfigMaps deleted, so the file
//! holds history and tombstones; a snapshot is saved through the maintenance API. Then
//! each command runs as a process of its own, rounds times, timed from spawn to exit,
//! its peak resident memory read from the kernel when it is reaped (`wait4`'s
//! `ru_maxrss`, exact, no sampling; through a small measuring parent, see
//! [`run_reaped`]): `etcdutl snapshot status` (every key walked and
//! hashed), `apistore --snapshot FILE count pods`, `analyze -o json` (every value's
//! prefix read, every object's metadata decoded) and `get` of one Pod: one updated
//! after the fill, whose last revision is among the file's newest records, where a get
//! looks first; and, without a goal, one of the first objects written, a Pod never updated,
//! which only a scan of the whole file finds (the file has no index from key to
//! revision).
//!
//! The binaries come from `cargo xtask bench`: etcdutl built from the Go module proxy
//! (interop/etcdutl, [`ETCDUTL_BIN_ENV`]), the command in release ([`CLI_BIN_ENV`]).

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apistore_protobuf::KubeProtobuf;
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use apistore_value::EncryptionConfig;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::error::{BenchError, Result};
use crate::pod::{pod, pod_name};
use crate::settings::Settings;

/// Where `cargo xtask bench` puts the etcdutl it built.
pub(crate) const ETCDUTL_BIN_ENV: &str = "APISTORE_ETCDUTL_BIN";
/// Where `cargo xtask bench` puts the `apistore` command it built in release.
pub(crate) const CLI_BIN_ENV: &str = "APISTORE_CLI_BIN";

/// The goal for `count` and `analyze`: at most this many times etcdutl's time.
const TIME_GOAL: f64 = 2.0;
/// The goal for the `get` of one key.
const GET_GOAL: Duration = Duration::from_millis(50);
/// The row of the `get` of a Pod written first and never since, which the goal does not
/// cover: the file has no index from key to revision, and only a whole scan finds a
/// key's last revision among the oldest records.
const OLD_POD_ROW: &str = "apistore get (a Pod written first, never updated)";
/// The change phase updates every object whose index is a multiple of this (each a
/// Pod: one in twenty of them).
const UPDATE_EVERY: u64 = 40;
/// Concurrent writers filling etcd.
const WRITERS: usize = 32;
/// How many namespaces the objects spread over.
const NAMESPACES: u64 = 20;

/// Whether the section is selected (`--only offline` or no `--only`).
pub(crate) fn selected(settings: &Settings) -> bool {
    settings.only.is_empty() || settings.only.iter().any(|o| o.starts_with("offline"))
}

/// The two binaries, when `cargo xtask bench` built them.
pub(crate) fn binaries_from_env() -> Option<(PathBuf, PathBuf)> {
    let path = |name| std::env::var_os(name).map(PathBuf::from);
    Some((path(CLI_BIN_ENV)?, path(ETCDUTL_BIN_ENV)?))
}

/// One command's figures over the rounds.
#[derive(Debug)]
struct Row {
    what: &'static str,
    command: String,
    times: Vec<Duration>,
    peak_rss_bytes: u64,
}

impl Row {
    fn median(&self) -> Duration {
        let mut times = self.times.clone();
        times.sort();
        times.get(times.len() / 2).copied().unwrap_or_default()
    }
}

/// The section's results.
#[derive(Debug)]
pub(crate) struct OfflineSection {
    objects: u64,
    file_bytes: u64,
    etcd_version: String,
    rows: Vec<Row>,
}

/// Fills an etcd, saves a snapshot and times the commands on it.
pub(crate) async fn run(settings: &Settings, cli: &Path, etcdutl: &Path) -> Result<OfflineSection> {
    let objects: u64 = if settings.quick { 20_000 } else { 200_000 };
    let rounds = if settings.quick { 1 } else { 3 };
    let etcd = EtcdServer::start(EtcdOptions {
        name: "bench-snapshot".to_owned(),
        ..EtcdOptions::default()
    })?;
    let mut client = etcd_client::Client::connect([etcd.endpoint()], None).await?;
    println!("offline: writing {objects} objects (Pods, ConfigMaps, encrypted Secrets)");
    let started = Instant::now();
    fill(&client, objects).await?;
    println!("  written in {:.0} s", started.elapsed().as_secs_f64());

    let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
        what: "create a scratch directory".to_owned(),
        source,
    })?;
    let file = dir.path().join("snapshot.db");
    let write_error = |source| BenchError::Io {
        what: format!("write {}", file.display()),
        source,
    };
    // Written as it arrives: the file is as large as etcd's database.
    let mut writer = std::io::BufWriter::new(File::create(&file).map_err(write_error)?);
    let mut stream = client.snapshot().await?;
    let mut file_bytes = 0;
    while let Some(message) = stream.message().await? {
        std::io::Write::write_all(&mut writer, message.blob()).map_err(write_error)?;
        file_bytes += message.blob().len() as u64;
    }
    std::io::Write::flush(&mut writer).map_err(write_error)?;
    drop(writer);
    drop(client);
    let etcd_version = etcd.binary().display().to_string();
    drop(etcd);
    println!("  snapshot of {:.0} MiB", file_bytes as f64 / 1048576.0);

    let snapshot = file.to_string_lossy().into_owned();
    // A Pod the change phase updated, among the newest records,
    // and one of the first objects written, a Pod never changed since: among the oldest
    // records. `objects / 2`, rounded down to one the change phase updates.
    let one_pod = format!(
        "pods/{}",
        pod_key(objects / 2 / UPDATE_EVERY * UPDATE_EVERY)
    );
    let old_pod = format!("pods/{}", pod_key(1));
    let commands: [(&'static str, PathBuf, Vec<String>); 5] = [
        (
            "etcdutl snapshot status",
            etcdutl.to_path_buf(),
            vec![
                "snapshot".into(),
                "status".into(),
                snapshot.clone(),
                "-w".into(),
                "json".into(),
            ],
        ),
        (
            "apistore count pods",
            cli.to_path_buf(),
            offline(&snapshot, &["count", "pods"]),
        ),
        (
            "apistore analyze",
            cli.to_path_buf(),
            offline(&snapshot, &["analyze", "-o", "json"]),
        ),
        (
            "apistore get (one Pod)",
            cli.to_path_buf(),
            offline(&snapshot, &["get", &one_pod, "-o", "json"]),
        ),
        (
            OLD_POD_ROW,
            cli.to_path_buf(),
            offline(&snapshot, &["get", &old_pod, "-o", "json"]),
        ),
    ];
    let mut rows = Vec::new();
    for (what, program, args) in commands {
        let mut row = Row {
            what,
            command: format!(
                "{} {}",
                program
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                args.join(" ").replace(&snapshot, "FILE")
            ),
            times: Vec::new(),
            peak_rss_bytes: 0,
        };
        for _ in 0..rounds {
            let out = dir.path().join("out");
            let (took, rss) = run_reaped(&program, &args, &out)?;
            let wanted = if what == OLD_POD_ROW {
                &old_pod
            } else {
                &one_pod
            };
            check_output(what, &out, wanted)?;
            row.times.push(took);
            row.peak_rss_bytes = row.peak_rss_bytes.max(rss);
        }
        println!(
            "  {what}: {:.0} ms, peak RSS {:.0} MiB",
            row.median().as_secs_f64() * 1000.0,
            row.peak_rss_bytes as f64 / 1048576.0
        );
        rows.push(row);
    }
    Ok(OfflineSection {
        objects,
        file_bytes,
        etcd_version,
        rows,
    })
}

fn offline(snapshot: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec!["--snapshot".to_owned(), snapshot.to_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all
}

/// The key of the `i`th Pod under `pods/`.
fn pod_key(i: u64) -> String {
    format!("ns-{}/{}", i % NAMESPACES, pod_name(i))
}

/// What kind of object the `i`th is, and its etcd key and stored bytes.
fn object(i: u64, kp: &KubeProtobuf, secrets: &EncryptionConfig) -> Result<(String, Vec<u8>)> {
    let namespace = format!("ns-{}", i % NAMESPACES);
    match i % 4 {
        0 | 1 => {
            let mut value = pod(i);
            value["metadata"]["namespace"] = json!(namespace);
            Ok((
                format!("/registry/pods/{}", pod_key(i)),
                kp.encode_value(&value)?,
            ))
        }
        2 => {
            let name = format!("config-{i:06}");
            let value = configmap(&namespace, &name);
            Ok((
                format!("/registry/configmaps/{namespace}/{name}"),
                kp.encode_value(&value)?,
            ))
        }
        _ => {
            let name = format!("secret-{i:06}");
            let key = format!("/registry/secrets/{namespace}/{name}");
            let plain = kp.encode_value(&secret(&namespace, &name))?;
            let stored = secrets
                .transformer_for("secrets")
                .transform_to_storage(Bytes::from(plain), key.as_bytes())
                .map_err(|err| BenchError::Invalid(format!("encrypt {key}: {err}")))?;
            Ok((key, stored.to_vec()))
        }
    }
}

fn configmap(namespace: &str, name: &str) -> Value {
    let data: serde_json::Map<String, Value> = (0..8)
        .map(|k| {
            (
                format!("setting-{k}.yaml"),
                json!(format!("{name}: {}", "x".repeat(240))),
            )
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
            "labels": {"app": "web"}, "creationTimestamp": "2026-01-02T03:04:05Z"},
        "data": data})
}

fn secret(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
            "creationTimestamp": "2026-01-02T03:04:05Z"},
        "type": "Opaque", "data": {"tls.crt": "YWJj".repeat(240), "tls.key": "ZGVm".repeat(120)}})
}

/// Writes the objects, then updates one Pod in twenty and deletes every hundredth
/// ConfigMap, so that the file holds older revisions and tombstones too.
async fn fill(client: &etcd_client::Client, objects: u64) -> Result<()> {
    let kp = KubeProtobuf::latest();
    let secrets = EncryptionConfig::parse(&crate::aesgcm_config("secrets"))?;
    let puts = futures::stream::iter(0..objects)
        .map(|i| {
            let mut client = client.clone();
            let prepared = object(i, kp, &secrets);
            async move {
                let (key, value) = prepared?;
                client.put(key, value, None).await?;
                Ok::<_, BenchError>(())
            }
        })
        .buffer_unordered(WRITERS);
    futures::pin_mut!(puts);
    while let Some(done) = puts.next().await {
        done?;
    }
    let changes =
        futures::stream::iter((0..objects).filter(|i| i % UPDATE_EVERY == 0 || i % 400 == 2))
            .map(|i| {
                let mut client = client.clone();
                let prepared = object(i, kp, &secrets);
                async move {
                    let (key, value) = prepared?;
                    if i % 4 == 2 {
                        client.delete(key, None).await?;
                    } else {
                        client.put(key, value, None).await?;
                    }
                    Ok::<_, BenchError>(())
                }
            })
            .buffer_unordered(WRITERS);
    futures::pin_mut!(changes);
    while let Some(done) = changes.next().await {
        done?;
    }
    Ok(())
}

/// The argument that makes the bench binary the measuring parent of one command
/// ([`measure_child`]).
pub(crate) const MEASURE_FLAG: &str = "--measure-child";

/// Runs `program` with stdout to `out`; returns the wall time from spawn to exit and its
/// peak RSS in bytes.
///
/// The command is not spawned from the bench itself: Linux carries a process's RSS
/// high-water mark across `exec` into the new program's `ru_maxrss`, so a child of the
/// bench (which held the whole snapshot file in memory a moment ago) would report the
/// bench's peak. A fresh copy of the bench binary, small at that point, spawns and reaps
/// it instead ([`measure_child`]) and writes the figures to a file, as `/usr/bin/time`
/// does.
fn run_reaped(program: &Path, args: &[String], out: &Path) -> Result<(Duration, u64)> {
    let io = |what: String| move |source| BenchError::Io { what, source };
    let stdout = File::create(out).map_err(io(format!("create {}", out.display())))?;
    let stderr_path = out.with_extension("stderr");
    let stderr =
        File::create(&stderr_path).map_err(io(format!("create {}", stderr_path.display())))?;
    let figures = out.with_extension("figures");
    let me = std::env::current_exe().map_err(io("find the bench binary".to_owned()))?;
    let status = Command::new(&me)
        .arg(MEASURE_FLAG)
        .arg(&figures)
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .status()
        .map_err(io(format!("run {}", me.display())))?;
    let text =
        std::fs::read_to_string(&figures).map_err(io(format!("read {}", figures.display())))?;
    let fields: Vec<u64> = text
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let (Some(&nanos), Some(&max_rss_kib), Some(&code), true) = (
        fields.first(),
        fields.get(1),
        fields.get(2),
        status.success(),
    ) else {
        return Err(BenchError::Invalid(format!(
            "measuring {} failed ({status}): {text}",
            program.display()
        )));
    };
    if code != 0 {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        return Err(BenchError::Invalid(format!(
            "{} {} exited with status {code}: {stderr}",
            program.display(),
            args.join(" ")
        )));
    }
    Ok((
        Duration::from_nanos(nanos),
        max_rss_kib.saturating_mul(1024),
    ))
}

/// `apistore-bench --measure-child FIGURES PROGRAM ARGS...`: runs PROGRAM with this
/// process's stdio, reaps it with `wait4`, and writes `<nanoseconds> <peak RSS KiB>
/// <exit code>` to FIGURES.
pub(crate) fn measure_child(mut args: impl Iterator<Item = String>) -> Result<()> {
    let usage = || BenchError::Invalid(format!("{MEASURE_FLAG} FIGURES PROGRAM ARGS..."));
    let figures = args.next().ok_or_else(usage)?;
    let program = args.next().ok_or_else(usage)?;
    let started = Instant::now();
    let child = Command::new(&program)
        .args(args)
        .spawn()
        .map_err(|source| BenchError::Io {
            what: format!("run {program}"),
            source,
        })?;
    let pid = i32::try_from(child.id())
        .map_err(|_| BenchError::Invalid(format!("pid {} out of range", child.id())))?;
    let (code, max_rss_kib) = reap(pid)?;
    let nanos = started.elapsed().as_nanos();
    std::fs::write(&figures, format!("{nanos} {max_rss_kib} {code}\n")).map_err(|source| {
        BenchError::Io {
            what: format!("write {figures}"),
            source,
        }
    })
}

/// Waits for the child `pid` and returns its exit code (or 128 + signal) and its peak
/// resident set in KiB. `std::process::Child::wait` does not give the child's rusage;
/// `wait4` does, exactly, from the kernel's own accounting.
#[allow(unsafe_code)]
fn reap(pid: i32) -> Result<(i32, u64)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data, valid when zeroed; wait4 writes it and status
    // for the child we spawned and have not waited for.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own unwaited child; both pointers are to live locals.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if reaped != pid {
        return Err(BenchError::Io {
            what: format!("wait for process {pid}"),
            source: std::io::Error::last_os_error(),
        });
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ok((code, u64::try_from(usage.ru_maxrss).unwrap_or(0)))
}

/// What each command printed is what it should have: the bench measures work done.
/// `pod` is the key a `get` asked for.
fn check_output(what: &str, out: &Path, pod: &str) -> Result<()> {
    let text = std::fs::read_to_string(out).map_err(|source| BenchError::Io {
        what: format!("read {}", out.display()),
        source,
    })?;
    let ok = match what {
        "apistore count pods" => text.trim().parse::<u64>().is_ok_and(|n| n > 0),
        _ if what.starts_with("apistore get") => pod
            .rsplit('/')
            .next()
            .is_some_and(|name| text.contains(name)),
        _ => text.trim_start().starts_with('{'),
    };
    if ok {
        Ok(())
    } else {
        Err(BenchError::Invalid(format!(
            "{what} printed something else: {}",
            text.chars().take(200).collect::<String>()
        )))
    }
}

impl OfflineSection {
    /// The section's table and its targets, in markdown.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n### Offline: a snapshot file read by the command, against etcdutl\n\n\
             {} objects (half Pods and a quarter ConfigMaps as kube's protobuf, a quarter \
             Secrets encrypted with AES-GCM; one Pod in twenty updated, a hundredth of the \
             ConfigMaps deleted) written to an etcd of the section's own (`{}`), saved through \
             the maintenance API: a file of {:.0} MiB. Each command is a process of its own, \
             timed from spawn to exit (median of the rounds); *peak RSS* is the kernel's \
             `ru_maxrss` for it, read by `wait4`. The first `get` is of a Pod updated after \
             the fill (its last revision among the file's newest records, where a get looks \
             first), the other of one of the first objects written, a Pod never updated since: \
             only a scan of the whole file finds its last revision (the file has no index \
             from key to revision), so it has no goal.\n",
            self.objects,
            self.etcd_version,
            self.file_bytes as f64 / 1048576.0
        );
        let _ = writeln!(
            out,
            "| command | time | × etcdutl | peak RSS | RSS ÷ file |"
        );
        let _ = writeln!(out, "|---|--:|--:|--:|--:|");
        let base = self.rows.first().map(Row::median).unwrap_or_default();
        for row in &self.rows {
            let _ = writeln!(
                out,
                "| `{}` | {:.0} ms | {:.2} | {:.0} MiB | {:.2} |",
                row.command,
                row.median().as_secs_f64() * 1000.0,
                ratio(row.median(), base),
                row.peak_rss_bytes as f64 / 1048576.0,
                row.peak_rss_bytes as f64 / self.file_bytes.max(1) as f64
            );
        }
        let _ = writeln!(
            out,
            "\n| target | figure | goal | verdict |\n|---|--:|--:|---|"
        );
        for row in self.rows.iter().skip(1) {
            if row.what == OLD_POD_ROW {
                continue;
            }
            let (figure, goal, pass) = if row.what.starts_with("apistore get") {
                let ms = row.median().as_secs_f64() * 1000.0;
                (
                    format!("{ms:.0} ms"),
                    format!("≤ {} ms", GET_GOAL.as_millis()),
                    row.median() <= GET_GOAL,
                )
            } else {
                let r = ratio(row.median(), base);
                (
                    format!("{r:.2}"),
                    format!("≤ {TIME_GOAL:.2}"),
                    r <= TIME_GOAL,
                )
            };
            let what = if row.what.starts_with("apistore get") {
                format!("{}: time", row.what)
            } else {
                format!("{}: time ÷ etcdutl snapshot status", row.what)
            };
            let verdict = if pass { "PASS" } else { "MISS" };
            let _ = writeln!(out, "| {what} | {figure} | {goal} | {verdict} |");
        }
        out
    }
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(f64::MIN_POSITIVE)
}
