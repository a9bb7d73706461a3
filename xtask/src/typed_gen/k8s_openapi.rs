//! The generator's reading of k8s-openapi's source: where it is (`cargo metadata`),
//! which Rust struct each OpenAPI definition is (its module path, its fields' Rust
//! types, the JSON name its `Deserialize` maps to each), and the element type inside
//! a field's `Option`/`Vec`/map/`Box`. k8s-openapi's files are generated, one
//! definition each, in a regular shape; this reads that shape, nothing more.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::error::{Result, XtaskError};

/// k8s-openapi's source directory, from `cargo metadata`.
pub(super) fn k8s_openapi_source(root: &Path) -> Result<PathBuf> {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(root)
        .output()
        .map_err(|e| XtaskError::io("run cargo metadata", e))?;
    if !output.status.success() {
        return Err(XtaskError::msg(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let meta: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| XtaskError::msg(format!("cargo metadata output: {e}")))?;
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "k8s-openapi")
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or_else(|| XtaskError::msg("cargo metadata lists no k8s-openapi package"))?;
    Ok(Path::new(manifest)
        .parent()
        .map(|p| p.join("src"))
        .unwrap_or_default())
}

/// One k8s-openapi type.
pub(super) enum RustType {
    /// A struct with named fields: JSON name -> (Rust field, Rust type), and whether
    /// it is a resource (`k8s_openapi::Resource`: a kind of its own).
    Struct {
        path: String,
        fields: HashMap<String, (String, String)>,
        resource: bool,
    },
    /// A struct holding a `serde_json::Value`, an enum, or a hand-written type.
    Other,
}

/// k8s-openapi's types of one version, by Go type name.
pub(super) fn rust_types(source: &Path, minor: u32) -> Result<HashMap<String, RustType>> {
    let dir = source.join(format!("v1_{minor}"));
    let mut files = Vec::new();
    collect_files(&dir, &mut files)?;
    files.sort();
    let mut out = HashMap::new();
    for file in files {
        let text = fs::read_to_string(&file)
            .map_err(|e| XtaskError::io(format!("read {}", file.display()), e))?;
        let Some(def) = text
            .lines()
            .find_map(|l| l.strip_prefix("// Generated from definition "))
        else {
            continue;
        };
        let go = go_name(def.trim());
        let rel = file.strip_prefix(&dir).unwrap_or(&file);
        let mut module: Vec<String> = rel
            .parent()
            .into_iter()
            .flat_map(|p| p.components())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let Some(name) = text.lines().find_map(|l| {
            l.strip_prefix("pub struct ")
                .or_else(|| l.strip_prefix("pub enum "))
                .map(|rest| {
                    rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or("")
                        .to_owned()
                })
        }) else {
            continue;
        };
        // A struct without Default (a required time in it) cannot be filled field by
        // field from an empty one: it goes through the serde path, as the other
        // hand-written shapes do.
        let has_default = text
            .lines()
            .take_while(|l| !l.starts_with(&format!("pub struct {name} ")))
            .any(|l| l.starts_with("#[derive(") && l.contains("Default"));
        if !text.contains(&format!("pub struct {name} {{")) || !has_default {
            out.insert(go, RustType::Other);
            continue;
        }
        module.insert(0, "k8s_openapi".to_owned());
        module.push(name.clone());
        let path = module.join("::");
        // Rust field -> type, from the struct; JSON name -> Rust field, from its
        // Deserialize impl's field visitor.
        let mut types = HashMap::new();
        let mut in_struct = false;
        for line in text.lines() {
            if line.starts_with(&format!("pub struct {name} {{")) {
                in_struct = true;
            } else if in_struct && line.starts_with('}') {
                in_struct = false;
            } else if in_struct {
                if let Some(rest) = line.strip_prefix("    pub ") {
                    if let Some((field, ty)) = rest.split_once(": ") {
                        types.insert(field.to_owned(), ty.trim_end_matches(',').to_owned());
                    }
                }
            }
        }
        let mut fields = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix('"') else {
                continue;
            };
            let Some((json, after)) = rest.split_once("\" => Field::Key_") else {
                continue;
            };
            let field = after.trim_end_matches(',');
            if let Some(ty) = types.get(field) {
                fields.insert(json.to_owned(), (field.to_owned(), ty.clone()));
            }
        }
        let resource = text.contains(&format!("impl crate::Resource for {name} "));
        out.insert(
            go,
            RustType::Struct {
                path,
                fields,
                resource,
            },
        );
    }
    Ok(out)
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        fs::read_dir(dir).map_err(|e| XtaskError::io(format!("read {}", dir.display()), e))?;
    for entry in entries {
        let path = entry
            .map_err(|e| XtaskError::io(format!("read {}", dir.display()), e))?
            .path();
        if path.is_dir() {
            collect_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// `io.k8s.api.core.v1.Pod` -> `k8s.io/api/core/v1.Pod`.
fn go_name(def: &str) -> String {
    let parts: Vec<&str> = def.split('.').collect();
    if parts.len() < 4 || parts[0] != "io" || parts[1] != "k8s" {
        return def.to_owned();
    }
    let last = parts[parts.len() - 1];
    format!("k8s.io/{}.{last}", parts[2..parts.len() - 1].join("/"))
}

/// The Rust type inside `Option<..>`, `Vec<..>`, a map's value or a `Box`, as the
/// generated code names it.
pub(super) fn element(ty: &str) -> String {
    let mut t = ty.trim();
    loop {
        let next = t
            .strip_prefix("Option<")
            .or_else(|| t.strip_prefix("std::vec::Vec<"))
            .or_else(|| t.strip_prefix("std::boxed::Box<"))
            .or_else(|| t.strip_prefix("std::collections::BTreeMap<std::string::String, "))
            .and_then(|rest| rest.strip_suffix('>'));
        match next {
            Some(inner) => t = inner,
            None => break,
        }
    }
    match t {
        "std::string::String" => "String".to_owned(),
        other => other.replacen("crate::", "k8s_openapi::", 1),
    }
}
