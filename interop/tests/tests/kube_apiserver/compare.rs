//! Comparing what kube-apiserver serves with what apistore read or wrote: every
//! difference as one line naming the object, the step and the field path.

use serde_json::Value;

use super::objects::Case;

/// Differences found, each one line naming the object and the step.
#[derive(Debug, Default)]
pub(crate) struct Findings(pub(crate) Vec<String>);

impl Findings {
    pub(crate) fn note(&mut self, case: &Case, step: &str, what: impl std::fmt::Display) {
        self.0.push(format!("{case}: {step}: {what}"));
    }

    /// Records every difference between what kube served and `seen`.
    pub(crate) fn compare(&mut self, case: &Case, step: &str, kube: &Value, seen: &Value) {
        let mut found = Vec::new();
        differences("", kube, seen, &mut found);
        for difference in found {
            self.note(case, step, difference);
        }
    }
}

/// The differences between `kube` and `other`, one per path, as
/// `.spec.resources: kube has {...}, apistore has (absent)`.
pub(crate) fn differences(path: &str, kube: &Value, other: &Value, out: &mut Vec<String>) {
    match (kube, other) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let absent = Value::Null;
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(&format!("{path}.{key}"), x, y, out),
                    (x, y) => out.push(format!(
                        "{path}.{key}: kube has {}, apistore has {}",
                        shown(x.unwrap_or(&absent), x.is_none()),
                        shown(y.unwrap_or(&absent), y.is_none())
                    )),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a != b => out.push(format!(
            "{path}: kube has {}, apistore has {}",
            shown(a, false),
            shown(b, false)
        )),
        _ => {}
    }
}

pub(crate) fn shown(value: &Value, absent: bool) -> String {
    if absent {
        return "(absent)".to_owned();
    }
    let text = value.to_string();
    if text.len() > 160 {
        format!("{}...", &text[..160])
    } else {
        text
    }
}

/// `object` without its resourceVersion and without these labels (and without the
/// labels map when nothing else is in it): what must stay the same across a write
/// that only added these labels.
pub(crate) fn without_write(object: &Value, labels: &[&str]) -> Value {
    let mut object = object.clone();
    let metadata = object["metadata"].as_object_mut().unwrap();
    metadata.remove("resourceVersion");
    if let Some(map) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        for label in labels {
            map.remove(*label);
        }
        if map.is_empty() {
            metadata.remove("labels");
        }
    }
    object
}
