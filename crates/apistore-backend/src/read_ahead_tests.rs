//! The read-ahead's tests: a page read on several threads holds to a read one by one
//! (property test), and the threads share a page as the module says.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use apistore_storage::{Codec, CodecError, DynamicObject, JsonCodec, LabelSelector, SelectByView};
use apistore_value::{AesGcmTransformer, Plaintext, Transformer};
use proptest::prelude::*;

use super::*;
use crate::list::ListPages;
use apistore_versioning::ApiObjectVersioner;

/// Counts the failed decodes reported.
#[derive(Clone, Default)]
struct Counted(Arc<AtomicUsize>);

impl DecodeErrors for Counted {
    fn record_decode_error(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// AES-GCM that notes which threads read values back, and stores each value
/// `padding` zero bytes longer (as an envelope would): the values weigh what a
/// larger object does in stored bytes, which decide the threads, while reading one
/// back costs no more (the tests run unoptimised).
#[derive(Debug)]
struct Noting {
    aes: AesGcmTransformer,
    threads: Mutex<HashSet<ThreadId>>,
    padding: usize,
    stall: Option<Stall>,
}

impl Noting {
    fn new(padding: usize) -> Self {
        Self {
            aes: AesGcmTransformer::new(&[7; 32]).unwrap(),
            threads: Mutex::new(HashSet::new()),
            padding,
            stall: None,
        }
    }

    /// One whose reads on a list-read thread stall (see [`Stall`]).
    fn stalling(release: usize) -> Self {
        Self {
            stall: Some(Stall {
                release,
                read_by_caller: AtomicUsize::new(0),
                gave_up: AtomicBool::new(false),
            }),
            ..Self::new(0)
        }
    }
}

/// Reads on a list-read thread (not the caller's) wait, from the first, until the
/// caller's thread has read `release` values: a thread that the system keeps off
/// its core. The wait ends for good after half a minute anyway, so that a reader
/// that never lets the caller get that far fails the test instead of hanging it.
#[derive(Debug)]
struct Stall {
    release: usize,
    read_by_caller: AtomicUsize,
    gave_up: AtomicBool,
}

impl Stall {
    fn wait_or_count(&self) {
        if thread::current().name() != Some("apistore-list-read") {
            self.read_by_caller.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let waited = std::time::Instant::now();
        while self.read_by_caller.load(Ordering::SeqCst) < self.release
            && !self.gave_up.load(Ordering::SeqCst)
        {
            if waited.elapsed() > std::time::Duration::from_secs(30) {
                self.gave_up.store(true, Ordering::SeqCst);
            }
            thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

impl Transformer for Noting {
    fn transform_from_storage(
        &self,
        data: Bytes,
        authenticated_data: &[u8],
    ) -> apistore_value::Result<Plaintext> {
        if let Ok(mut threads) = self.threads.lock() {
            threads.insert(thread::current().id());
        }
        if let Some(stall) = &self.stall {
            stall.wait_or_count();
        }
        let sealed = data.len().saturating_sub(self.padding);
        let data = if self.padding > 0 && data[sealed..].iter().all(|byte| *byte == 0) {
            data.slice(..sealed)
        } else {
            data
        };
        self.aes.transform_from_storage(data, authenticated_data)
    }

    fn transform_to_storage(
        &self,
        data: Bytes,
        authenticated_data: &[u8],
    ) -> apistore_value::Result<Bytes> {
        let sealed = self.aes.transform_to_storage(data, authenticated_data)?;
        let mut padded = Vec::with_capacity(sealed.len() + self.padding);
        padded.extend_from_slice(&sealed);
        padded.resize(sealed.len() + self.padding, 0);
        Ok(Bytes::from(padded))
    }
}

/// What is stored under one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stored {
    /// A ConfigMap labelled app=web.
    Web,
    /// A ConfigMap labelled app=db.
    Db,
    /// Encrypted bytes that are not JSON.
    Undecodable,
    /// Bytes that do not decrypt.
    Untransformable,
    /// A ConfigMap labelled app=db that the list's codec refuses (a body fault
    /// only its decode finds), though JSON reads it.
    DbFault,
}

/// The JSON codec, counting its decodes and refusing values that hold `fault`.
#[derive(Default)]
struct Counting {
    json: JsonCodec<DynamicObject>,
    decodes: AtomicUsize,
}

impl Codec<DynamicObject> for Counting {
    fn encode(&self, object: &DynamicObject) -> Result<Bytes, CodecError> {
        self.json.encode(object)
    }

    fn decode(&self, data: &[u8]) -> Result<DynamicObject, CodecError> {
        self.decodes.fetch_add(1, Ordering::Relaxed);
        if data.windows(5).any(|w| w == b"fault") {
            return Err(CodecError::Decode("a body fault".into()));
        }
        self.json.decode(data)
    }
}

/// Bytes of padding that make a ConfigMap about 2.3 KiB stored: a thousand of them
/// hold work for four read threads (see [`MIN_BYTES_PER_THREAD`]).
const PADDED: usize = 2200;

/// The predicate of a test list: `app=web` when `select_web`, else every object, with
/// this limit.
fn web_or_all(select_web: bool, limit: i64) -> SelectionPredicate {
    SelectionPredicate {
        label: if select_web {
            LabelSelector::parse("app=web").unwrap()
        } else {
            LabelSelector::default()
        },
        limit,
        ..SelectionPredicate::default()
    }
}

fn stored_values(values: &[Stored], transformer: &Noting) -> Vec<(String, Bytes, i64)> {
    values
        .iter()
        .enumerate()
        .map(|(i, stored)| {
            let key = format!("/registry/configmaps/ns/cm-{i:05}");
            let json = |app: &str| {
                let mut object =
                    DynamicObject::new("v1", "ConfigMap", &format!("cm-{i:05}")).within("ns");
                object
                    .metadata
                    .labels
                    .insert("app".to_owned(), app.to_owned());
                Bytes::from(serde_json::to_vec(&object).unwrap())
            };
            let plain = match stored {
                Stored::Web => json("web"),
                Stored::Db => json("db"),
                Stored::DbFault => {
                    let mut object: serde_json::Value =
                        serde_json::from_slice(&json("db")).unwrap();
                    object["data"] = serde_json::json!({"a": "fault"});
                    Bytes::from(serde_json::to_vec(&object).unwrap())
                }
                Stored::Undecodable | Stored::Untransformable => Bytes::from_static(b"{not json"),
            };
            let value = match stored {
                Stored::Untransformable => Bytes::from_static(b"not a sealed value"),
                _ => transformer
                    .transform_to_storage(plain, key.as_bytes())
                    .unwrap(),
            };
            (key, value, 2 + i as i64)
        })
        .collect()
}

/// How a test list reads its values back, beyond its threads.
#[derive(Debug, Clone, Copy)]
struct How {
    /// With a stored selector reading values as plain JSON.
    stored_selector: bool,
    /// Through [`ListPages::take_page_off_runtime`], from a multi-thread runtime's
    /// `block_on`.
    off_runtime: bool,
}

const IN_TURN: How = How {
    stored_selector: false,
    off_runtime: false,
};
const SELECTOR: How = How {
    stored_selector: true,
    off_runtime: false,
};

/// One list over `values` as a backend runs it (each page read after the last key
/// taken, `page_limit` keys long), reading values back as `how` says, summarised: each
/// page's outcome, the list's end (items, continue token, remaining count, or the
/// error), the counts and the decode errors reported; then the threads that read
/// values back, and how many values the list's codec decoded. Each value is stored
/// `padding` bytes longer (see [`Noting`]).
fn list(
    values: &[Stored],
    padding: usize,
    read_threads: usize,
    limit: i64,
    select_web: bool,
    unsafe_deletion: bool,
    how: How,
) -> (String, usize, usize) {
    let transformer = Arc::new(Noting::new(padding));
    let decode_errors = Counted::default();
    let codec = Arc::new(Counting::default());
    let mut layers: ObjectLayers<DynamicObject, Counted> = ObjectLayers::new(
        Arc::clone(&codec) as Arc<dyn Codec<DynamicObject>>,
        Arc::clone(&transformer) as Arc<dyn Transformer>,
        decode_errors.clone(),
    );
    layers.set_read_threads(read_threads);
    layers.set_unsafe_malformed_object_deletion(unsafe_deletion.then(|| Arc::from("configmaps")));
    if how.stored_selector {
        layers.set_stored_selector(Some(Arc::new(SelectByView::new(Arc::new(JsonCodec::<
            DynamicObject,
        >::new(
        ))))));
    }
    let stored = stored_values(values, &transformer);
    let predicate = web_or_all(select_web, limit);
    let runtime = how.off_runtime.then(two_worker_runtime);
    let mut pages: ListPages<'_, DynamicObject, String> = ListPages::new(&predicate);
    let mut summary = String::new();
    let mut start = 0;
    loop {
        let page_limit = usize::try_from(pages.page_limit()).unwrap();
        let end = if page_limit == 0 {
            stored.len()
        } else {
            (start + page_limit).min(stored.len())
        };
        let page = stored[start..end].to_vec();
        let more = end < stored.len();
        let count = (stored.len() - start) as i64;
        let taken = match &runtime {
            Some(runtime) => {
                runtime.block_on(pages.take_page_off_runtime(&layers, page, more, count))
            }
            None => pages.take_page(&layers, page.into_iter(), more, count),
        };
        match taken {
            Ok(true) => break,
            Ok(false) => {
                summary.push_str("page;");
                let last = pages.last_key();
                start = stored
                    .iter()
                    .position(|(key, _, _)| key == last)
                    .map_or(stored.len(), |at| at + 1);
            }
            Err(err) => {
                summary.push_str(&format!("failed: {err};"));
                break;
            }
        }
    }
    match pages.finish("/registry/configmaps/", 1000, &ApiObjectVersioner) {
        Ok(list) => {
            let names: Vec<&str> = list
                .items
                .iter()
                .map(|item| item.metadata.name.as_str())
                .collect();
            summary.push_str(&format!(
                "items {names:?} continue {:?} remaining {:?};",
                list.metadata.continue_token, list.metadata.remaining_item_count
            ));
        }
        Err(err) => summary.push_str(&format!("list failed: {err};")),
    }
    summary.push_str(&format!(
        "counts {:?}; decode errors {}",
        pages.counts(),
        decode_errors.0.load(Ordering::Relaxed)
    ));
    let threads = transformer
        .threads
        .lock()
        .map_or(0, |threads| threads.len());
    (summary, threads, codec.decodes.load(Ordering::Relaxed))
}

/// A page of a thousand values: mostly `app=web`, some `app=db`, a few that do not
/// decode and, when `untransformable`, a few the transformer refuses.
fn mixed_page(untransformable: bool) -> Vec<Stored> {
    (0..1000)
        .map(|i| match i % 7 {
            0 | 3 => Stored::Db,
            5 if i % 3 == 0 => Stored::Undecodable,
            6 if untransformable && i % 5 == 0 => Stored::Untransformable,
            _ => Stored::Web,
        })
        .collect()
}

/// A page of a thousand values of 2.3 KiB is read on the threads asked for, and the
/// list is the one read on the caller's thread alone; a page with less work than two
/// threads' worth is read on the caller's thread.
#[test]
fn a_large_page_is_read_on_several_threads_to_the_same_list() {
    let values = mixed_page(false);
    for unsafe_deletion in [false, true] {
        let (alone, threads, _) = list(&values, PADDED, 1, 0, true, unsafe_deletion, IN_TURN);
        assert_eq!(threads, 1);
        let (parallel, threads, _) = list(&values, PADDED, 4, 0, true, unsafe_deletion, IN_TURN);
        assert_eq!(threads, 4, "{parallel}");
        assert_eq!(parallel, alone);
    }
    // Two hundred such values, or a thousand unpadded ones (a few hundred stored
    // bytes each at most), are not worth a second thread.
    let (_, threads, _) = list(&values[..200], PADDED, 4, 0, false, false, IN_TURN);
    assert_eq!(threads, 1);
    let (_, threads, _) = list(&values, 0, 4, 0, false, false, IN_TURN);
    assert_eq!(threads, 1);
    // Just over a MiB of work: two threads, though four are allowed.
    let (_, threads, _) = list(&values[..450], PADDED, 4, 0, false, false, IN_TURN);
    assert_eq!(threads, 2);
}

/// Runs whose thread cannot start are read on the caller's thread, each value once,
/// in their place: the results are those of reading every value in turn.
#[test]
fn runs_whose_thread_does_not_start_are_read_by_the_caller() {
    let transformer = Noting::new(0);
    let values: Vec<Stored> = (0..900)
        .map(|i| match i % 11 {
            4 => Stored::Untransformable,
            7 => Stored::Undecodable,
            1 | 2 => Stored::Db,
            _ => Stored::Web,
        })
        .collect();
    let stored = stored_values(&values, &transformer);
    let decode_errors = Counted::default();
    let layers: ObjectLayers<DynamicObject, Counted> = ObjectLayers::new(
        Arc::new(JsonCodec::<DynamicObject>::default()),
        Arc::new(transformer),
        decode_errors.clone(),
    );
    let summary = |reads: Vec<Read<String, DynamicObject>>| -> Vec<String> {
        reads
            .into_iter()
            .map(|(key, read)| match read {
                Ok(Some(object)) => format!(
                    "{key}: {} {:?}",
                    object.metadata.name, object.metadata.labels
                ),
                Ok(None) => format!("{key}: dropped unread"),
                Err(unread) => format!("{key}: unread {}", layers.report_unread(unread)),
            })
            .collect()
    };
    let in_turn: Vec<String> = summary(
        stored
            .iter()
            .map(|(key, value, rev)| {
                let read = layers.read_stored(key, value.clone(), *rev).map(Some);
                (key.clone(), read)
            })
            .collect(),
    );
    assert_eq!(in_turn.len(), 900);
    for refused in [vec![1, 2, 3], vec![2], vec![1, 3]] {
        let everything = SelectionPredicate::everything();
        let reads = read_on_threads(&layers, &everything, stored.clone(), 4, |run| {
            !refused.contains(&run)
        });
        assert_eq!(summary(reads), in_turn, "runs {refused:?} refused");
    }
    // Reading reported nothing itself: each of the four summaries reported each value
    // that does not decode once, through `report_unread`.
    let undecodable = values.iter().filter(|v| **v == Stored::Undecodable).count();
    assert_eq!(decode_errors.0.load(Ordering::Relaxed), 4 * undecodable);
}

/// A reading thread held off its core holds up only the run it claimed: the
/// caller's thread reads the rest of the batch meanwhile (with a run per thread,
/// it would read its half and wait), and the results are those of reading every
/// value in turn.
#[test]
fn a_stalled_reading_thread_leaves_its_unclaimed_runs_to_the_caller() {
    // The other thread stalls until the caller's has read seven eighths of the
    // batch: more than its share if the batch were cut in halves.
    let release = 700;
    let transformer = Arc::new(Noting::stalling(release));
    let stored = stored_values(&[Stored::Web; 800], &transformer);
    let layers: ObjectLayers<DynamicObject, Counted> = ObjectLayers::new(
        Arc::new(JsonCodec::<DynamicObject>::default()),
        transformer.clone(),
        Counted::default(),
    );
    let everything = SelectionPredicate::everything();
    let reads = read_on_threads(&layers, &everything, stored, 2, |_| true);
    let stall = transformer.stall.as_ref().unwrap();
    assert!(stall.read_by_caller.load(Ordering::SeqCst) >= release);
    let names: Vec<String> = reads
        .into_iter()
        .map(|(key, read)| match read {
            Ok(Some(object)) => format!("{key}: {}", object.metadata.name),
            other => format!("{key}: {:?}", other.map(|_| ())),
        })
        .collect();
    let in_turn: Vec<String> = (0..800)
        .map(|i| format!("/registry/configmaps/ns/cm-{i:05}: cm-{i:05}"))
        .collect();
    assert_eq!(names, in_turn);
}

/// A stored selector decodes only what the selector keeps, and the list is the
/// one decoding every value gives, on one thread or several, paged or whole; a value
/// the selector cannot read is decoded, and fails, as without it.
#[test]
fn a_stored_selector_decodes_only_the_selected_values_to_the_same_list() {
    let values = mixed_page(true);
    let count = |kind: Stored| values.iter().filter(|v| **v == kind).count();
    let (web, db, undecodable) = (
        count(Stored::Web),
        count(Stored::Db),
        count(Stored::Undecodable),
    );
    for (threads, limit, unsafe_deletion) in [(1, 0, true), (4, 0, true), (1, 300, true)] {
        let web_list = |how| list(&values, PADDED, threads, limit, true, unsafe_deletion, how);
        let (every, _, every_decodes) = web_list(IN_TURN);
        let (selected, _, selected_decodes) = web_list(SELECTOR);
        assert_eq!(selected, every);
        if limit == 0 {
            assert_eq!(every_decodes, web + db + undecodable);
            assert_eq!(selected_decodes, web + undecodable);
        } else {
            assert!(selected_decodes < every_decodes, "{selected_decodes}");
        }
    }
    // A list that selects everything decodes everything, selector or not.
    let (every, _, every_decodes) = list(&values, 0, 1, 0, false, true, IN_TURN);
    assert_eq!(
        list(&values, 0, 1, 0, false, true, SELECTOR),
        (every, 1, every_decodes)
    );
}

/// The one way a stored selector changes a list: a value it drops is never
/// decoded, so a fault only the decode finds fails no list that does not select it
/// (kube-apiserver's store fails every list that reads it). A list that selects the
/// value still fails on it.
#[test]
fn a_dropped_value_is_never_decoded_so_its_body_fault_fails_no_list() {
    let values = [Stored::Web, Stored::DbFault, Stored::Web];
    let (every, _, _) = list(&values, 0, 1, 0, true, false, IN_TURN);
    assert!(
        every.contains("failed: ") && every.contains("a body fault"),
        "{every}"
    );
    let (selected, _, decodes) = list(&values, 0, 1, 0, true, false, SELECTOR);
    assert!(
        selected.contains(r#"items ["cm-00000", "cm-00002"]"#) && !selected.contains("fault"),
        "{selected}"
    );
    assert_eq!(decodes, 2);
    let (everything, _, _) = list(&values, 0, 1, 0, false, false, SELECTOR);
    assert!(everything.contains("a body fault"), "{everything}");
}

/// A multi-thread runtime of two workers, as this machine's tests run on.
fn two_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

/// Takes one page of `values` ConfigMaps labelled app=web through
/// [`ListPages::take_page_off_runtime`] on a worker of a multi-thread runtime, with
/// `limit`, selecting app=web when `select`: how many items the list took, and
/// whether the worker read any value back itself.
fn take_on_a_worker(values: usize, limit: i64, select: bool) -> (usize, bool) {
    let transformer = Arc::new(Noting::new(0));
    let stored = stored_values(&vec![Stored::Web; values], &transformer);
    let layers: ObjectLayers<DynamicObject, Counted> = ObjectLayers::new(
        Arc::new(Counting::default()) as Arc<dyn Codec<DynamicObject>>,
        Arc::clone(&transformer) as Arc<dyn Transformer>,
        Counted::default(),
    );
    let (taken, worker) = two_worker_runtime().block_on(async move {
        tokio::spawn(async move {
            let predicate = web_or_all(select, limit);
            let mut pages: ListPages<'_, DynamicObject, String> = ListPages::new(&predicate);
            // The thread polling the task when the page is handed over: a page read
            // in place is read here, before the task is polled again.
            let worker = thread::current().id();
            let count = stored.len() as i64;
            pages
                .take_page_off_runtime(&layers, stored, false, count)
                .await
                .unwrap();
            (pages.take_items().len(), worker)
        })
        .await
        .unwrap()
    });
    let readers = transformer.threads.lock().unwrap().clone();
    assert!(!readers.is_empty(), "some thread read the values back");
    (taken, readers.contains(&worker))
}

/// A page of 64 values or more that the list takes whole is read back off the
/// worker; a smaller one, and one a limit may stop part way while selectors
/// filter, are read in place; every one lists the same items.
#[test]
fn a_large_page_taken_off_the_runtime_is_read_on_another_thread() {
    use crate::list::OFF_RUNTIME_VALUES;
    let large = OFF_RUNTIME_VALUES;
    assert_eq!(take_on_a_worker(large, 0, false), (large, false));
    assert_eq!(take_on_a_worker(large * 4, 0, true), (large * 4, false));
    // A limit without selectors: etcd's page is the list's page, taken whole.
    assert_eq!(
        take_on_a_worker(large * 2, large as i64, false),
        (large, false)
    );
    assert_eq!(take_on_a_worker(large - 1, 0, false), (large - 1, true));
    assert_eq!(take_on_a_worker(large * 2, 40, true), (40, true));
}

fn stored_value(corrupt_per_mille: u32) -> impl Strategy<Value = Stored> {
    (0u32..1000).prop_map(move |roll| match roll {
        r if r < corrupt_per_mille / 2 => Stored::Undecodable,
        r if r < corrupt_per_mille => Stored::Untransformable,
        r if r % 3 == 0 => Stored::Db,
        _ => Stored::Web,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever is stored, however the list pages and selects, reading ahead on
    /// several threads lists what reading in turn lists: the same items, the same
    /// token, the same error, the same counts and decode errors reported.
    #[test]
    fn reading_ahead_lists_what_reading_in_turn_lists(
        values in (prop_oneof![Just(0u32), Just(5), Just(100), Just(600)])
            .prop_flat_map(|rate| prop::collection::vec(stored_value(rate), 0..1400)),
        limit in prop_oneof![Just(0i64), Just(1), Just(40), Just(300), Just(900)],
        select_web: bool,
        unsafe_deletion: bool,
        threads in 2usize..5,
        padding in prop_oneof![Just(0usize), Just(PADDED)],
    ) {
        let (alone, _, _) = list(&values, padding, 1, limit, select_web, unsafe_deletion, IN_TURN);
        let (parallel, _, _) =
            list(&values, padding, threads, limit, select_web, unsafe_deletion, IN_TURN);
        prop_assert_eq!(&parallel, &alone);
        // With a stored selector, on several threads: the same list again.
        let (selected, _, _) =
            list(&values, padding, threads, limit, select_web, unsafe_deletion, SELECTOR);
        prop_assert_eq!(&selected, &alone);
        // Taken off the runtime's worker, as the etcd3 store takes its pages.
        let off_runtime = How { stored_selector: false, off_runtime: true };
        let (taken_off, _, _) =
            list(&values, padding, threads, limit, select_web, unsafe_deletion, off_runtime);
        prop_assert_eq!(&taken_off, &alone);
        let off_runtime = How { stored_selector: true, off_runtime: true };
        let (taken_off, _, _) =
            list(&values, padding, threads, limit, select_web, unsafe_deletion, off_runtime);
        prop_assert_eq!(taken_off, alone);
    }
}
