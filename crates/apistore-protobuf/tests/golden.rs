//! Golden tests: the transcoder against kube's own serializers.
//!
//! The fixtures are written by `interop/golden` (Go, one kube minor's k8s.io/* modules):
//! for every kind, pairs of the protobuf bytes kube-apiserver stores (`k8s\0` +
//! runtime.Unknown, from apimachinery's protobuf serializer) and the JSON
//! `encoding/json.Marshal` emits for the same object. One set is committed per minor
//! checked, `tests/golden` (1.31) and `tests/golden-1.<minor>`, and each is checked with
//! its own minor's schema ([`KubeProtobuf::for_version`]). For every case the
//! transcoder must give Go's bytes exactly, both ways. Every failure is collected and
//! printed (kind, case, the first differing offset with context, the JSON path or
//! protobuf field path there) before the test fails, so one run shows all of them.
//!
//! `APISTORE_GOLDEN_DIR` points `interop_fixtures_transcode_byte_for_byte` at a larger
//! set generated at interop time (`go run -modfile=go-1.37.mod . -out DIR -fuzz 200`
//! in `interop/golden`), `APISTORE_GOLDEN_KUBE` names the minor it was generated for
//! (`1.37`; 1.31 when unset, the minor of `interop/golden/go.mod`).

// Tests may unwrap: a panic there is a failed test (helpers outside #[test] too).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use apistore_protobuf::{KubeProtobuf, PROTOBUF_MAGIC};
use apistore_storage::KubeVersion;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

/// One fixture file: every case of one group-version-kind.
#[derive(Deserialize)]
struct Fixture {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    json: String,
    protobuf: String,
}

/// The committed fixture sets, one per minor checked: `tests/golden` holds 1.31's
/// (it came first), `tests/golden-1.<minor>` the others'.
const COMMITTED: [KubeVersion; 3] = [KubeVersion::V1_31, KubeVersion::V1_34, KubeVersion::V1_37];

fn committed_dir(version: KubeVersion) -> PathBuf {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    if version == KubeVersion::V1_31 {
        tests.join("golden")
    } else {
        tests.join(format!("golden-{version}"))
    }
}

/// The minor a fixture set from `APISTORE_GOLDEN_DIR` was generated for.
fn interop_version() -> KubeVersion {
    std::env::var("APISTORE_GOLDEN_KUBE").map_or(KubeVersion::V1_31, |v| {
        v.parse()
            .unwrap_or_else(|e| panic!("APISTORE_GOLDEN_KUBE: {e}"))
    })
}

/// Every `*.json` fixture in `dir` but the index, sorted by file name.
fn load_dir(dir: &Path) -> Vec<(String, Fixture)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading fixture directory {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "index.json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read(&path).unwrap();
            let fixture: Fixture = serde_json::from_slice(&text)
                .unwrap_or_else(|e| panic!("{}: not a fixture file: {e}", path.display()));
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, fixture)
        })
        .collect()
}

/// What one run over a fixture directory found.
#[derive(Default)]
struct Report {
    kinds: usize,
    cases: usize,
    failures: Vec<String>,
    failed_cases: BTreeSet<(String, String)>,
}

impl Report {
    fn fail(&mut self, fixture: &Fixture, case: &Case, what: String) {
        self.failed_cases.insert((
            format!("{} {}", fixture.api_version, fixture.kind),
            case.name.clone(),
        ));
        self.failures.push(format!(
            "{} {} [{}]: {what}",
            fixture.api_version, fixture.kind, case.name
        ));
    }

    fn assert_clean(&self, version: KubeVersion, dir: &Path) {
        if self.failures.is_empty() {
            eprintln!(
                "golden {version}: {} kinds, {} cases from {}: all match",
                self.kinds,
                self.cases,
                dir.display()
            );
            return;
        }
        let failed_kinds: BTreeSet<&String> = self.failed_cases.iter().map(|(k, _)| k).collect();
        let mut msg = format!(
            "golden {version}: {} of {} cases in {} of {} kinds from {} do not match ({} failures):\n",
            self.failed_cases.len(),
            self.cases,
            failed_kinds.len(),
            self.kinds,
            dir.display(),
            self.failures.len()
        );
        for f in &self.failures {
            msg.push_str("\n- ");
            msg.push_str(f);
        }
        msg.push_str("\n\nkinds with failures:");
        for k in failed_kinds {
            let n = self.failed_cases.iter().filter(|(kk, _)| kk == k).count();
            let _ = write!(msg, "\n  {k} ({n} cases)");
        }
        panic!("{msg}");
    }
}

/// Checks every case of every fixture in `dir` both ways and for its type meta, with
/// the schema of `version`.
fn check_dir(version: KubeVersion, dir: &Path) -> Report {
    let kp = KubeProtobuf::for_version(version);
    let mut report = Report::default();
    for (file, fixture) in load_dir(dir) {
        report.kinds += 1;
        for case in &fixture.cases {
            report.cases += 1;
            let stored = match STANDARD.decode(&case.protobuf) {
                Ok(b) => b,
                Err(e) => {
                    report.fail(&fixture, case, format!("{file}: bad base64: {e}"));
                    continue;
                }
            };
            let json = case.json.as_bytes();
            if !stored.starts_with(&PROTOBUF_MAGIC[..]) {
                report.fail(&fixture, case, "fixture lacks the k8s\\0 magic".into());
                continue;
            }

            match KubeProtobuf::type_meta(&stored) {
                Ok((av, k)) if av == fixture.api_version && k == fixture.kind => {}
                Ok((av, k)) => report.fail(
                    &fixture,
                    case,
                    format!(
                        "type_meta: got ({av:?}, {k:?}), want ({:?}, {:?})",
                        fixture.api_version, fixture.kind
                    ),
                ),
                Err(e) => report.fail(&fixture, case, format!("type_meta: error: {e}")),
            }

            match kp.decode_to_json(&stored) {
                Ok(got) if got == json => {}
                Ok(got) => report.fail(&fixture, case, json_mismatch("decode_to_json", json, &got)),
                Err(e) => report.fail(&fixture, case, format!("decode_to_json: error: {e}")),
            }

            match kp.encode_json(json) {
                Ok(got) if got == stored => {}
                Ok(got) => report.fail(
                    &fixture,
                    case,
                    protobuf_mismatch("encode_json", &stored, &got),
                ),
                Err(e) => report.fail(&fixture, case, format!("encode_json: error: {e}")),
            }
        }
    }
    report
}

fn first_difference(want: &[u8], got: &[u8]) -> usize {
    want.iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| want.len().min(got.len()))
}

/// Describes where two JSON texts part: the offset, the JSON path there, and the
/// text around it on both sides.
fn json_mismatch(op: &str, want: &[u8], got: &[u8]) -> String {
    let at = first_difference(want, got);
    let ctx = |b: &[u8]| {
        let start = floor_char(b, at.saturating_sub(60));
        let end = floor_char(b, (at + 60).min(b.len()));
        // Control characters escaped, the rest as it is (quotes stay readable).
        String::from_utf8_lossy(&b[start..end])
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
    };
    format!(
        "{op}: JSON differs at byte {at} (want {} bytes, got {}), at {}\n    want: …{}…\n    got:  …{}…",
        want.len(),
        got.len(),
        json_path_at(want, at),
        ctx(want),
        ctx(got)
    )
}

fn floor_char(b: &[u8], mut i: usize) -> usize {
    while i > 0 && i < b.len() && (b[i] & 0xC0) == 0x80 {
        i -= 1;
    }
    i
}

/// Describes where two protobuf encodings part: the offset, the field-number path
/// there (in the expected bytes), and hex around it on both sides.
fn protobuf_mismatch(op: &str, want: &[u8], got: &[u8]) -> String {
    let at = first_difference(want, got);
    let hex = |b: &[u8]| {
        let start = at.saturating_sub(24);
        let end = (at + 24).min(b.len());
        let mut s = String::new();
        for (i, byte) in b[start..end].iter().enumerate() {
            if start + i == at {
                s.push('[');
            }
            let _ = write!(s, "{byte:02x}");
            if start + i == at {
                s.push(']');
            }
            s.push(' ');
        }
        s
    };
    let body = PROTOBUF_MAGIC.len();
    let path = if at >= body {
        wire_path(&want[body..], at - body)
    } else {
        "magic".to_owned()
    };
    format!(
        "{op}: protobuf differs at byte {at} (want {} bytes, got {}), at field path {path} (1=typeMeta 2=raw ...)\n    want: {}\n    got:  {}",
        want.len(),
        got.len(),
        hex(want),
        hex(got)
    )
}

/// The JSON path (`.metadata.labels["a"]`, `.spec.containers[1]`) of the value that
/// byte `at` of a JSON text falls in.
fn json_path_at(text: &[u8], at: usize) -> String {
    enum Frame {
        Object(Option<String>),
        Array(usize),
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    // Whether the next string in an object is a key.
    let mut expect_key = false;
    while i < at.min(text.len()) {
        match text[i] {
            b'{' => {
                stack.push(Frame::Object(None));
                expect_key = true;
            }
            b'[' => {
                stack.push(Frame::Array(0));
                expect_key = false;
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => match stack.last_mut() {
                Some(Frame::Array(n)) => *n += 1,
                Some(Frame::Object(k)) => {
                    *k = None;
                    expect_key = true;
                }
                None => {}
            },
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    if text[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if expect_key {
                    if let Some(Frame::Object(k)) = stack.last_mut() {
                        let raw = &text[start..i.min(text.len())];
                        *k = Some(String::from_utf8_lossy(raw).into_owned());
                    }
                    expect_key = false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    let mut path = String::new();
    for frame in &stack {
        match frame {
            Frame::Object(Some(k)) => {
                if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    let _ = write!(path, ".{k}");
                } else {
                    let _ = write!(path, "[\"{k}\"]");
                }
            }
            Frame::Object(None) => path.push_str(".<key>"),
            Frame::Array(n) => {
                let _ = write!(path, "[{n}]");
            }
        }
    }
    if path.is_empty() {
        "$".to_owned()
    } else {
        format!("${path}")
    }
}

/// The field-number path (`2.1.3[0]`) of the field that byte `at` of a protobuf
/// message falls in. Length-delimited fields are entered when their payload parses
/// as a message to its end (a guess: the wire format does not say).
fn wire_path(msg: &[u8], at: usize) -> String {
    let mut path = String::new();
    let mut buf = msg;
    let mut at = at;
    while let Some(fields) = parse_fields(buf) {
        let Some((num, _, _, payload)) =
            fields.into_iter().find(|(_, s, e, _)| *s <= at && at < *e)
        else {
            break;
        };
        if !path.is_empty() {
            path.push('.');
        }
        let _ = write!(path, "{num}");
        match payload {
            Some((ps, pl)) if at >= ps && parse_fields(&buf[ps..ps + pl]).is_some() => {
                buf = &buf[ps..ps + pl];
                at -= ps;
            }
            _ => break,
        }
    }
    if path.is_empty() {
        "<top>".to_owned()
    } else {
        path
    }
}

/// (field number, offset of its key, offset past its end, Some((payload offset,
/// payload length)) for length-delimited fields).
type WireField = (u64, usize, usize, Option<(usize, usize)>);

fn parse_fields(buf: &[u8]) -> Option<Vec<WireField>> {
    fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *buf.get(*pos)?;
            *pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let start = pos;
        let key = varint(buf, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        if num == 0 {
            return None;
        }
        match wire {
            0 => {
                varint(buf, &mut pos)?;
                out.push((num, start, pos, None));
            }
            1 => {
                pos = pos.checked_add(8).filter(|&p| p <= buf.len())?;
                out.push((num, start, pos, None));
            }
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).ok()?;
                let end = pos.checked_add(len).filter(|&p| p <= buf.len())?;
                out.push((num, start, end, Some((pos, len))));
                pos = end;
            }
            5 => {
                pos = pos.checked_add(4).filter(|&p| p <= buf.len())?;
                out.push((num, start, pos, None));
            }
            _ => return None,
        }
    }
    Some(out)
}

fn check_committed(version: KubeVersion) {
    let dir = committed_dir(version);
    check_dir(version, &dir).assert_clean(version, &dir);
}

#[test]
fn committed_1_31_fixtures_transcode_byte_for_byte() {
    check_committed(KubeVersion::V1_31);
}

#[test]
fn committed_1_34_fixtures_transcode_byte_for_byte() {
    check_committed(KubeVersion::V1_34);
}

#[test]
fn committed_1_37_fixtures_transcode_byte_for_byte() {
    check_committed(KubeVersion::V1_37);
}

#[test]
fn interop_fixtures_transcode_byte_for_byte() {
    let version = interop_version();
    let dir = std::env::var_os("APISTORE_GOLDEN_DIR")
        .map_or_else(|| committed_dir(version), PathBuf::from);
    check_dir(version, &dir).assert_clean(version, &dir);
}

/// Every `tests/golden*` directory is a set the tests above check.
#[test]
fn every_committed_fixture_set_is_checked() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let checked: BTreeSet<PathBuf> = COMMITTED.iter().map(|&v| committed_dir(v)).collect();
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(&tests).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() && name.starts_with("golden") {
            found.insert(path);
        }
    }
    assert_eq!(
        found,
        checked,
        "fixture sets in {} and the sets checked",
        tests.display()
    );
}

/// Every kind a minor's embedded schema knows has a fixture file in that minor's set,
/// and every fixture's kind is one the transcoder knows in that minor.
#[test]
fn committed_fixtures_cover_every_kind_in_their_schema() {
    let problems: Vec<String> = COMMITTED.iter().filter_map(|&v| coverage(v)).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// What the committed set of `version` leaves out of its schema, or holds beyond it.
fn coverage(version: KubeVersion) -> Option<String> {
    #[derive(Deserialize)]
    struct SchemaKinds {
        kinds: Vec<(String, String, String)>,
    }
    let schema_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schema/k8s-{version}.json"));
    let schema: SchemaKinds =
        serde_json::from_slice(&std::fs::read(&schema_path).unwrap()).unwrap();
    let in_schema: BTreeSet<(String, String)> =
        schema.kinds.into_iter().map(|(av, k, _)| (av, k)).collect();

    let kp = KubeProtobuf::for_version(version);
    let mut covered = BTreeSet::new();
    let mut unknown = Vec::new();
    for (file, fixture) in load_dir(&committed_dir(version)) {
        if !kp.knows(&fixture.api_version, &fixture.kind) {
            unknown.push(format!("{} {} ({file})", fixture.api_version, fixture.kind));
        }
        if fixture.cases.is_empty() {
            unknown.push(format!("{file}: no cases"));
        }
        covered.insert((fixture.api_version, fixture.kind));
    }
    let missing: Vec<String> = in_schema
        .difference(&covered)
        .map(|(av, k)| format!("{av} {k}"))
        .collect();
    if missing.is_empty() && unknown.is_empty() {
        eprintln!(
            "golden {version}: the {} fixtures cover the {} kinds of the schema",
            covered.len(),
            in_schema.len()
        );
        return None;
    }
    Some(format!(
        "{version}: {} of {} schema kinds have no fixture:\n  {}\n{} fixtures are of kinds the transcoder does not know (or have no cases):\n  {}",
        missing.len(),
        in_schema.len(),
        missing.join("\n  "),
        unknown.len(),
        unknown.join("\n  ")
    ))
}

/// The mismatch reports themselves: paths found where they should be.
#[test]
fn mismatch_reports_name_the_json_path_and_the_field_path() {
    let json = br#"{"kind":"Pod","metadata":{"labels":{"a.b/c":"x"}},"spec":{"containers":[{"name":"a"},{"name":"b"}]}}"#;
    let at = json.windows(3).position(|w| w == b"\"b\"").unwrap() + 1;
    assert_eq!(json_path_at(json, at), "$.spec.containers[1].name");
    let at = json.windows(3).position(|w| w == b"\"x\"").unwrap() + 1;
    assert_eq!(json_path_at(json, at), r#"$.metadata.labels["a.b/c"]"#);

    // field 2 { field 1 { field 3: "a" } } ("a" does not parse as a message)
    let msg = [0x12, 0x05, 0x0a, 0x03, 0x1a, 0x01, b'a'];
    assert_eq!(wire_path(&msg, 6), "2.1.3");
}
