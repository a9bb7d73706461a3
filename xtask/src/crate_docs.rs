//! A check that the workspace's documentation keeps up with its crates: README.md and
//! docs/architecture.md name every crate under `crates/`, and every library crate has
//! its own README and the package metadata a downstream project (and `cargo package`)
//! needs. Run first by `cargo xtask test`, so a new crate cannot land undocumented.

use std::fs;
use std::path::Path;

use crate::error::{Result, XtaskError};

/// The documents that must name every crate.
const OVERVIEWS: &[&str] = &["README.md", "docs/architecture.md"];

/// The package fields every library crate sets.
const PACKAGE_FIELDS: &[&str] = &["description", "readme", "keywords", "categories"];

/// One crate under `crates/`: its package name, whether it is a library, and its
/// manifest's text.
struct Member {
    name: String,
    library: bool,
    manifest: String,
    has_readme: bool,
}

/// Fails listing every crate a document leaves out and every library crate without
/// its README or package metadata.
pub(crate) fn check(root: &Path) -> Result<()> {
    let members = members(root)?;
    let mut overviews = Vec::new();
    for overview in OVERVIEWS {
        let path = root.join(overview);
        let text = fs::read_to_string(&path)
            .map_err(|source| XtaskError::io(format!("read {}", path.display()), source))?;
        overviews.push((*overview, text));
    }
    let problems = problems(&members, &overviews);
    if problems.is_empty() {
        println!(
            "xtask: README.md and docs/architecture.md name all {} crates; every library crate has its README and package metadata",
            members.len()
        );
        return Ok(());
    }
    Err(XtaskError::StepsFailed(problems))
}

fn members(root: &Path) -> Result<Vec<Member>> {
    let crates = root.join("crates");
    let entries = fs::read_dir(&crates)
        .map_err(|source| XtaskError::io(format!("list {}", crates.display()), source))?;
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let manifest_path = dir.join("Cargo.toml");
        let Ok(manifest) = fs::read_to_string(&manifest_path) else {
            continue;
        };
        let Some(name) = package_name(&manifest) else {
            continue;
        };
        members.push(Member {
            name,
            library: dir.join("src/lib.rs").is_file(),
            manifest,
            has_readme: dir.join("README.md").is_file(),
        });
    }
    members.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(members)
}

/// The `name = "..."` of a manifest's `[package]` table.
fn package_name(manifest: &str) -> Option<String> {
    let package = manifest.split("[package]").nth(1)?;
    let table = package.split("\n[").next()?;
    table.lines().find_map(|line| {
        let value = line.trim().strip_prefix("name")?.trim().strip_prefix('=')?;
        Some(value.trim().trim_matches('"').to_owned())
    })
}

fn problems(members: &[Member], overviews: &[(&str, String)]) -> Vec<String> {
    let mut problems = Vec::new();
    for member in members {
        for (overview, text) in overviews {
            if !text.contains(&format!("`{}`", member.name)) {
                problems.push(format!(
                    "{overview} does not name the crate `{}` (add it to the crate table)",
                    member.name
                ));
            }
        }
        if !member.library {
            continue;
        }
        if !member.has_readme {
            problems.push(format!("crates/{}/README.md is missing", member.name));
        }
        for field in PACKAGE_FIELDS {
            let set = member
                .manifest
                .lines()
                .any(|line| line.trim_start().starts_with(&format!("{field} =")));
            if !set {
                problems.push(format!(
                    "crates/{}/Cargo.toml has no `{field}` (cargo package needs it)",
                    member.name
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, manifest: &str, has_readme: bool) -> Member {
        Member {
            name: name.to_owned(),
            library: true,
            manifest: manifest.to_owned(),
            has_readme,
        }
    }

    #[test]
    fn package_names_come_from_the_package_table() {
        let manifest = "[package]\nname = \"apistore-x\"\nversion = \"0.1.0\"\n\n[dependencies]\nname = \"no\"\n";
        assert_eq!(package_name(manifest).as_deref(), Some("apistore-x"));
        assert_eq!(package_name("[workspace]\nmembers = []\n"), None);
    }

    #[test]
    fn a_crate_left_out_or_without_metadata_is_named() {
        let full = "[package]\nname = \"a\"\ndescription = \"d\"\nreadme = \"README.md\"\nkeywords = []\ncategories = []\n";
        let members = [
            member("apistore-a", full, true),
            member("apistore-b", "[package]\nname = \"b\"\n", false),
        ];
        let overviews = [
            ("README.md", "| `apistore-a` | ... |".to_owned()),
            (
                "docs/architecture.md",
                "`apistore-a` `apistore-b`".to_owned(),
            ),
        ];
        let problems = problems(&members, &overviews);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("README.md does not name the crate `apistore-b`")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("crates/apistore-b/README.md is missing"))
        );
        assert!(problems.iter().any(|p| p.contains("has no `keywords`")));
        assert!(
            !problems.iter().any(|p| p.contains("apistore-a")),
            "{problems:?}"
        );
    }
}
