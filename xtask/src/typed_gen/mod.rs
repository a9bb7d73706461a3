//! `cargo xtask gen-typed`: writes apistore-protobuf's typed decoders
//! (`crates/apistore-protobuf/src/typed/generated.rs`) for every k8s-openapi version
//! (kube 1.33 to 1.37) from two inputs: the embedded schema of each kube minor (each
//! Go field's tag, JSON name, Go type, `omitempty`, inline) and k8s-openapi's own
//! source (which Rust struct and field each Go type and JSON name is, and its Rust
//! type). A struct whose code is the same in every version is written once; one that
//! differs is written per run of versions, inside k8s-openapi's `k8s_if_*!` macros, so
//! only the enabled version's code is compiled. The file goes through rustfmt.
//!
//! `cargo xtask test` regenerates it in memory and fails when the committed file
//! differs, so neither input can move without the decoders following.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Result, XtaskError};

mod emit;
mod k8s_openapi;

use emit::{gate, impl_text, runs, rustfmt};

use k8s_openapi::{RustType, element, k8s_openapi_source, rust_types};

/// The k8s-openapi versions (kube minors) the decoders are generated for.
pub(crate) const MINORS: [u32; 5] = [33, 34, 35, 36, 37];
/// The one the workspace builds and tests with (k8s-openapi's `latest`).
pub(crate) const LATEST: u32 = 37;
/// The generated file, relative to the workspace root.
const OUT_FILE: &str = "crates/apistore-protobuf/src/typed/generated.rs";
/// The schemas, relative to the workspace root.
const SCHEMA_DIR: &str = "crates/apistore-protobuf/schema";

/// Writes the generated file.
pub(crate) fn write(root: &Path) -> Result<()> {
    let text = generate(root)?;
    let path = root.join(OUT_FILE);
    fs::write(&path, text).map_err(|e| XtaskError::io(format!("write {}", path.display()), e))?;
    println!("xtask: wrote {}", path.display());
    Ok(())
}

/// The generated file when it differs from what the inputs give now.
pub(crate) fn stale(root: &Path) -> Result<Option<PathBuf>> {
    let text = generate(root)?;
    let path = root.join(OUT_FILE);
    Ok((fs::read_to_string(&path).ok().as_deref() != Some(text.as_str())).then_some(path))
}

/// One schema field: (JSON name, omitempty, omitzero, inline, tag, Go type).
struct SchemaField {
    json: String,
    omitempty: bool,
    omitzero: bool,
    inline: bool,
    tag: u64,
    go: String,
}

fn schema_fields(types: &serde_json::Map<String, Value>, go: &str) -> Vec<SchemaField> {
    types
        .get(go)
        .and_then(|t| t["fields"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|f| {
            let flags = f[1].as_str()?;
            Some(SchemaField {
                json: f[0].as_str()?.to_owned(),
                omitempty: flags.contains('o'),
                omitzero: flags.contains('z'),
                inline: flags.contains('i'),
                tag: f[2].as_u64()?,
                go: f[4].as_str()?.to_owned(),
            })
        })
        .collect()
}

/// How the generated code reads a Go type.
enum Read {
    /// A `Kind` in `fields.rs`/`leaves.rs`, and whether it is a message (never left out
    /// under `omitempty`) or a scalar.
    Kind(&'static str, bool),
    /// A struct with generated code.
    Msg,
    /// Through the serde path, with the Go type's name.
    Serde(String),
    /// A Go named slice of strings (`ExtraValue`).
    Wrapped,
    /// Not read (TypeMeta, whose apiVersion and kind k8s-openapi has no fields for).
    Skip,
}

fn read_of(
    base: &str,
    types: &serde_json::Map<String, Value>,
    rust: &HashMap<String, RustType>,
) -> std::result::Result<Read, String> {
    Ok(match base {
        "string" => Read::Kind("GoStr", false),
        "int32" => Read::Kind("GoI32", false),
        "int64" => Read::Kind("GoI64", false),
        "bool" => Read::Kind("GoBool", false),
        "float64" => Read::Kind("GoF64", false),
        "bytes" => Read::Kind("GoBytes", false),
        msg => {
            let special = types
                .get(msg)
                .and_then(|t| t.get("special"))
                .and_then(Value::as_str);
            match special {
                Some("quantity") => Read::Kind("GoQuantity", true),
                Some("time") => Read::Kind("GoTime", true),
                Some("microtime") => Read::Kind("GoMicroTime", true),
                Some("intorstring") => Read::Kind("GoIntOrString", true),
                Some("rawjson" | "json" | "orbool" | "orarray" | "orstringarray") => {
                    Read::Serde(msg.to_owned())
                }
                Some("wrapslice") => Read::Wrapped,
                Some("typemeta") => Read::Skip,
                Some(other) => return Err(format!("special type {other} of {msg}")),
                None => match rust.get(msg) {
                    Some(RustType::Struct { .. }) => Read::Msg,
                    Some(RustType::Other) => Read::Serde(msg.to_owned()),
                    None => return Err(format!("k8s-openapi has no type for {msg}")),
                },
            }
        }
    })
}

/// The generated code of one struct: its match arms and its zero lines.
#[derive(Default)]
struct Code {
    arms: Vec<(u64, String)>,
    zeros: Vec<String>,
    bits: u32,
}

/// The arms for `go`'s fields (flattened through inline structs), writing into
/// `rust_fields`.
fn fields_code(
    go: &str,
    rust_fields: &HashMap<String, (String, String)>,
    types: &serde_json::Map<String, Value>,
    rust: &HashMap<String, RustType>,
    code: &mut Code,
    skipped: &mut Vec<String>,
) -> std::result::Result<(), String> {
    for f in schema_fields(types, go) {
        if f.inline {
            let base = f.go.trim_start_matches('*');
            if matches!(read_of(base, types, rust), Ok(Read::Skip)) {
                continue;
            }
            let mut inner = Code {
                bits: code.bits,
                ..Code::default()
            };
            fields_code(base, rust_fields, types, rust, &mut inner, skipped)?;
            code.bits = inner.bits;
            code.zeros.append(&mut inner.zeros);
            if inner.arms.is_empty() {
                continue;
            }
            inner.arms.sort_by_key(|a| a.0);
            let mut arm = String::from("inline(value, cx, |tag, value, cx| match tag {\n");
            for (tag, body) in inner.arms {
                let _ = writeln!(arm, "                {tag} => {body},");
            }
            arm.push_str("                _ => Ok(()),\n            })");
            code.arms.push((f.tag, arm));
            continue;
        }
        let Some((field, rust_ty)) = rust_fields.get(&f.json) else {
            skipped.push(format!("{go}.{}", f.json));
            continue;
        };
        let (ptr, list, map, base) = if let Some(b) = f.go.strip_prefix('*') {
            (true, false, false, b)
        } else if let Some(b) = f.go.strip_prefix("[]") {
            (false, true, false, b)
        } else if let Some(b) = f.go.strip_prefix("map:") {
            (false, false, true, b)
        } else {
            (false, false, false, f.go.as_str())
        };
        let e = element(rust_ty);
        let json = &f.json;
        let slot = format!("&mut self.{field}");
        let mut zero = None;
        let call = match read_of(base, types, rust)? {
            Read::Skip => continue,
            Read::Kind(kind, is_msg) => {
                if list {
                    format!("list::<{kind}, {e}, _>({slot}, value, cx)")
                } else if map {
                    format!("map::<{kind}, {e}, _>({slot}, value, cx)")
                } else {
                    let zero_applies = !ptr
                        && !f.omitzero
                        && (is_msg || !f.omitempty)
                        && !matches!(kind, "GoBytes" | "GoTime" | "GoMicroTime");
                    if zero_applies {
                        zero = Some(format!("zero::<{kind}, {e}, _>({slot});"));
                    }
                    let omit = f.omitempty && !ptr && !is_msg;
                    format!("one::<{kind}, {e}, _>({slot}, value, cx, {omit})")
                }
            }
            Read::Msg => {
                if list {
                    format!("list_msg::<{e}, _>({slot}, value, cx)")
                } else if map {
                    format!("map_msg::<{e}, _>({slot}, value, cx)")
                } else {
                    if !ptr && !f.omitzero {
                        zero = Some(format!("msg_zero::<{e}, _>({slot}, cx)?;"));
                    }
                    format!("msg::<{e}, _>({slot}, value, cx)")
                }
            }
            Read::Serde(name) => {
                if list {
                    format!("list_serde::<{e}, _>({slot}, value, cx, {name:?})")
                } else if map {
                    format!("map_serde::<{e}, _>({slot}, value, cx, {name:?})")
                } else {
                    if !ptr && !f.omitzero {
                        zero = Some(format!("serde_zero::<{e}, _>({slot}, cx, {name:?})?;"));
                    }
                    format!("serde_one::<{e}, _>({slot}, value, cx, {name:?})")
                }
            }
            Read::Wrapped => {
                if !map {
                    return Err(format!("{go}.{json}: a named slice outside a map"));
                }
                format!("map_wrapped({slot}, value, cx)")
            }
        };
        let body = match zero {
            Some(z) => {
                let bit = code.bits;
                code.bits += 1;
                if code.bits > 128 {
                    return Err(format!("{go}: more than 128 fields with zeros"));
                }
                code.zeros.push(format!(
                    "        if seen & (1 << {bit}) == 0 {{\n            {z}\n        }}"
                ));
                format!(
                    "{{\n                *seen |= 1 << {bit};\n                {call}.map_err(at({json:?}))\n            }}"
                )
            }
            None => format!("{call}.map_err(at({json:?}))"),
        };
        code.arms.push((f.tag, body));
    }
    Ok(())
}

/// What one kube minor's generation gives: each struct's code by Rust path, the
/// resource types, and the Go fields k8s-openapi has no field for.
struct Minor {
    impls: BTreeMap<String, String>,
    resources: Vec<String>,
    skipped: usize,
}

/// The decoders of one kube minor.
fn generate_minor(root: &Path, source: &Path, minor: u32) -> Result<Minor> {
    let schema_path = root.join(SCHEMA_DIR).join(format!("k8s-1.{minor}.json"));
    let text = fs::read_to_string(&schema_path)
        .map_err(|e| XtaskError::io(format!("read {}", schema_path.display()), e))?;
    let schema: Value = serde_json::from_str(&text)
        .map_err(|e| XtaskError::msg(format!("{}: {e}", schema_path.display())))?;
    let types = schema["types"]
        .as_object()
        .ok_or_else(|| XtaskError::msg(format!("{}: no types", schema_path.display())))?;
    let rust = rust_types(source, minor)?;
    let mut impls = BTreeMap::new();
    let mut resources = Vec::new();
    let mut skipped = Vec::new();
    for (go, rt) in &rust {
        let RustType::Struct {
            path,
            fields,
            resource,
        } = rt
        else {
            continue;
        };
        let Some(t) = types.get(go) else {
            continue;
        };
        if t.get("special").is_some() {
            continue;
        }
        let mut code = Code::default();
        if let Err(e) = fields_code(go, fields, types, &rust, &mut code, &mut skipped) {
            return Err(XtaskError::msg(format!("kube 1.{minor}: {e}")));
        }
        code.arms.sort_by_key(|a| a.0);
        if *resource {
            resources.push(path.clone());
        }
        impls.insert(path.clone(), impl_text(path, &code));
    }
    Ok(Minor {
        impls,
        resources,
        skipped: skipped.len(),
    })
}

/// The generated file, formatted.
fn generate(root: &Path) -> Result<String> {
    let source = k8s_openapi_source(root)?;
    let mut minors = Vec::new();
    for minor in MINORS {
        minors.push((minor, generate_minor(root, &source, minor)?));
    }
    // Each struct's variants, with the minors each is the code of.
    let mut variants: BTreeMap<&str, BTreeMap<&str, Vec<u32>>> = BTreeMap::new();
    let mut resources: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (minor, m) in &minors {
        for (path, text) in &m.impls {
            variants
                .entry(path)
                .or_default()
                .entry(text)
                .or_default()
                .push(*minor);
        }
        for path in &m.resources {
            resources.entry(path).or_default().push(*minor);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `cargo xtask gen-typed` from schema/k8s-1.3X.json and k8s-openapi's\n\
         // types of kube {}: do not edit.",
        MINORS
            .iter()
            .map(|m| format!("1.{m}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (minor, m) in &minors {
        let _ = writeln!(
            out,
            "// kube 1.{minor}: {} structs, {} resources; {} Go fields k8s-openapi has no field for (left unread, as serde leaves them).",
            m.impls.len(),
            m.resources.len(),
            m.skipped
        );
    }
    out.push_str("\nuse super::prelude::*;\n\n");
    out.push_str(
        "// The kube minor of the k8s-openapi version enabled: the one these decoders are of.\n",
    );
    for minor in MINORS {
        let _ = writeln!(
            out,
            "k8s_openapi::k8s_if_1_{minor}! {{\n/// k8s-openapi's kube minor.\npub(crate) const MINOR: u32 = {minor};\n}}"
        );
    }
    out.push_str(
        "/// Hands every resource type of the enabled version to `visitor`: the codec's\n\
         /// table of decoders, and the test that holds them equal to serde's.\n\
         pub(crate) fn each_resource(visitor: &mut impl super::VisitResource) {\n",
    );
    for (path, minors) in &resources {
        for run in runs(minors) {
            let (open, close) = gate(&run);
            let _ = write!(out, "{open}visitor.visit::<{path}>();\n{close}");
        }
    }
    out.push_str("}\n");
    for by_text in variants.values() {
        for (text, minors) in by_text {
            for run in runs(minors) {
                let (open, close) = gate(&run);
                let _ = write!(out, "\n{open}{text}{close}");
            }
        }
    }
    rustfmt(root, &out)
}
