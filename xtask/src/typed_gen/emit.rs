//! The text of the generated file: one struct's impls, the k8s-openapi version
//! macros around code that differs between versions, and rustfmt over the whole.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use super::{Code, MINORS};
use crate::error::{Result, XtaskError};

/// One struct's impls.
pub(super) fn impl_text(path: &str, code: &Code) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "impl Message for {path} {{\n    fn merge_field(&mut self, tag: u32, value: WireVal<'_>, cx: &mut Cx<'_>, seen: &mut u128) -> Result<(), FieldError> {{\n"
    );
    if code.arms.is_empty() {
        out.push_str("        let _ = (tag, value, cx, seen);\n        Ok(())\n    }\n");
    } else {
        out.push_str("        match tag {\n");
        for (tag, body) in &code.arms {
            let _ = writeln!(out, "            {tag} => {body},");
        }
        out.push_str("            _ => Ok(()),\n        }\n    }\n");
    }
    out.push_str(
        "    fn finish(&mut self, seen: u128, cx: &mut Cx<'_>) -> Result<(), FieldError> {\n",
    );
    if code.zeros.is_empty() {
        out.push_str("        let _ = (seen, cx);\n");
    } else {
        for z in &code.zeros {
            let _ = writeln!(out, "{z}");
        }
    }
    out.push_str("        Ok(())\n    }\n}\n");
    let _ = writeln!(out, "impl FromKubeProtobuf for {path} {{}}");
    out
}

/// The k8s-openapi macro around code for these minors (contiguous in [`MINORS`]):
/// (opening, closing); none for all of them.
pub(super) fn gate(run: &[u32]) -> (String, String) {
    let (Some(&first), Some(&last)) = (run.first(), run.last()) else {
        return (String::new(), String::new());
    };
    let (lowest, highest) = (MINORS[0], MINORS[MINORS.len() - 1]);
    match (first == lowest, last == highest) {
        (true, true) => (String::new(), String::new()),
        _ if first == last => (format!("k8s_openapi::k8s_if_1_{first}! {{\n"), "}\n".into()),
        (true, false) => (
            format!("k8s_openapi::k8s_if_le_1_{last}! {{\n"),
            "}\n".into(),
        ),
        (false, true) => (
            format!("k8s_openapi::k8s_if_ge_1_{first}! {{\n"),
            "}\n".into(),
        ),
        (false, false) => (
            format!("k8s_openapi::k8s_if_ge_1_{first}! {{\nk8s_openapi::k8s_if_le_1_{last}! {{\n"),
            "}\n}\n".into(),
        ),
    }
}

/// The minors split into runs contiguous in [`MINORS`].
pub(super) fn runs(minors: &[u32]) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = Vec::new();
    for &m in minors {
        let position = MINORS.iter().position(|&x| x == m);
        let follows = out
            .last()
            .and_then(|r| r.last())
            .is_some_and(|&prev| MINORS.iter().position(|&x| x == prev).map(|p| p + 1) == position);
        match out.last_mut() {
            Some(run) if follows => run.push(m),
            _ => out.push(vec![m]),
        }
    }
    out
}

/// `text` as rustfmt writes it (the workspace's edition and settings).
pub(super) fn rustfmt(root: &Path, text: &str) -> Result<String> {
    use std::io::Write as _;
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2024"])
        .current_dir(root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| XtaskError::io("run rustfmt", e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| XtaskError::io("write to rustfmt", e))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| XtaskError::io("run rustfmt", e))?;
    if !output.status.success() {
        return Err(XtaskError::msg(format!(
            "rustfmt refused the generated code: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    String::from_utf8(output.stdout).map_err(|e| XtaskError::msg(format!("rustfmt output: {e}")))
}
