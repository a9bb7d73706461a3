//! `cargo xtask interop`'s checks of what is generated from the Go reference and
//! committed: the protobuf schema (`interop/schema`) and the golden fixtures
//! (`interop/golden`) must come out of today's Go programs byte for byte, and a larger
//! fuzzed set than the committed one must pass the protobuf crate's golden tests.
//!
//! So the committed files cannot drift from the reference, and every interop run tries
//! objects the committed set never had.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Result, XtaskError};
use crate::go::Go;
use crate::provision;
use crate::run::run_step;

/// The committed schemas, one per kube minor, relative to the workspace root.
const SCHEMA_DIR: &str = "crates/apistore-protobuf/schema";
/// The kube minors with a schema (`k8s-1.<minor>.json`, made with
/// `interop/schema/go-1.<minor>.mod`).
const SCHEMA_MINORS: [u32; 7] = [31, 32, 33, 34, 35, 36, 37];
/// The committed golden fixture sets, relative to the workspace root, with the kube
/// minor each is of (made with `interop/golden/go-1.<minor>.mod`).
pub(crate) const GOLDEN_SETS: [(u32, &str); 3] = [
    (31, "crates/apistore-protobuf/tests/golden"),
    (34, "crates/apistore-protobuf/tests/golden-1.34"),
    (37, "crates/apistore-protobuf/tests/golden-1.37"),
];
/// Environment variable naming the kube minor of the set in [`GOLDEN_DIR_ENV`].
pub(crate) const GOLDEN_KUBE_ENV: &str = "APISTORE_GOLDEN_KUBE";
/// How the committed fixtures were made (interop/golden/README.md).
const GOLDEN_ARGS: [&str; 4] = ["-fuzz", "2", "-seed", "1"];
/// The larger set each interop run checks: 20 fuzzed objects per kind.
pub(crate) const LARGE_GOLDEN_ARGS: [&str; 4] = ["-fuzz", "20", "-seed", "31"];
/// Environment variable the golden tests read a fixture directory from.
pub(crate) const GOLDEN_DIR_ENV: &str = "APISTORE_GOLDEN_DIR";

/// Where the generated files of this run go.
fn scratch(root: &Path, name: &str) -> Result<PathBuf> {
    let dir = root.join("target/interop").join(name);
    if dir.exists() {
        fs::remove_dir_all(&dir)
            .map_err(|e| XtaskError::io(format!("remove {}", dir.display()), e))?;
    }
    fs::create_dir_all(&dir).map_err(|e| XtaskError::io(format!("create {}", dir.display()), e))?;
    Ok(dir)
}

/// Builds one of the generator programs into target/tools, with extra `go build`
/// flags (a `-modfile` choosing the kube minor).
fn build(root: &Path, go: &Go, module: &str, binary: &str, flags: &[&str]) -> Result<PathBuf> {
    let tools = root.join(provision::TOOLS_DIR);
    fs::create_dir_all(&tools)
        .map_err(|e| XtaskError::io(format!("create {}", tools.display()), e))?;
    let output = tools.join(binary);
    go.build(&root.join(module), &output, &[], flags)?;
    Ok(output)
}

/// The schema of every kube minor generated now equals the committed one.
pub(crate) fn schema_is_current(root: &Path, go: &Go) -> Result<()> {
    let scratch = scratch(root, "schema")?;
    let mut differ = Vec::new();
    for minor in SCHEMA_MINORS {
        let modfile = format!("-modfile=go-1.{minor}.mod");
        let program = build(
            root,
            go,
            "interop/schema",
            &format!("apistore-schema-1.{minor}"),
            &[&modfile],
        )?;
        let name = format!("k8s-1.{minor}.json");
        let out = scratch.join(&name);
        run_step(Command::new(&program).arg("-out").arg(&out))?;
        if read(&out)? != read(&root.join(SCHEMA_DIR).join(&name))? {
            differ.push(name);
        }
    }
    if differ.is_empty() {
        println!(
            "xtask: {SCHEMA_DIR}/k8s-1.{{{}..{}}}.json are what interop/schema generates today",
            SCHEMA_MINORS[0],
            SCHEMA_MINORS[SCHEMA_MINORS.len() - 1]
        );
        Ok(())
    } else {
        Err(XtaskError::GeneratedDiffers(format!(
            "{} in {SCHEMA_DIR} differ from what interop/schema generates ({}); regenerate \
             them (interop/schema/README.md) and review the change",
            differ.join(", "),
            scratch.display()
        )))
    }
}

/// The golden generator of one kube minor, built into target/tools.
pub(crate) fn golden_program(root: &Path, go: &Go, minor: u32) -> Result<PathBuf> {
    let modfile = format!("-modfile=go-1.{minor}.mod");
    build(
        root,
        go,
        "interop/golden",
        &format!("apistore-golden-1.{minor}"),
        &[&modfile],
    )
}

/// The golden fixtures of one kube minor generated now (by `program`) equal the
/// committed set `golden`, file by file.
pub(crate) fn golden_is_current(
    root: &Path,
    program: &Path,
    minor: u32,
    golden: &str,
) -> Result<()> {
    let out = scratch(root, &format!("golden-committed-1.{minor}"))?;
    run_step(
        Command::new(program)
            .arg("-out")
            .arg(&out)
            .args(GOLDEN_ARGS),
    )?;
    let generated = files(&out)?;
    let committed = files(&root.join(golden))?;
    let mut differences: Vec<String> = Vec::new();
    for (name, bytes) in &generated {
        match committed.get(name) {
            None => differences.push(format!("{name} is not committed")),
            Some(theirs) if theirs != bytes => differences.push(format!("{name} differs")),
            Some(_) => {}
        }
    }
    differences.extend(
        committed
            .keys()
            .filter(|name| !generated.contains_key(*name))
            .map(|name| format!("{name} is no longer generated")),
    );
    if differences.is_empty() {
        println!(
            "xtask: {golden} ({} files) is what interop/golden generates today for kube 1.{minor}",
            committed.len()
        );
        Ok(())
    } else {
        let shown = differences
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        Err(XtaskError::GeneratedDiffers(format!(
            "{golden} differs from what interop/golden {} generates for kube 1.{minor}: {} \
             file(s) ({shown}); regenerate it (interop/golden/README.md) and review the change",
            GOLDEN_ARGS.join(" "),
            differences.len()
        )))
    }
}

/// Generates the larger fuzzed set; returns its directory.
pub(crate) fn large_golden_set(root: &Path, program: &Path, minor: u32) -> Result<PathBuf> {
    let out = scratch(root, &format!("golden-large-1.{minor}"))?;
    run_step(
        Command::new(program)
            .arg("-out")
            .arg(&out)
            .args(LARGE_GOLDEN_ARGS),
    )?;
    Ok(out)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| XtaskError::io(format!("read {}", path.display()), e))
}

/// The files directly in `dir`, by name.
fn files(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let entries =
        fs::read_dir(dir).map_err(|e| XtaskError::io(format!("list {}", dir.display()), e))?;
    let mut files = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|e| XtaskError::io(format!("list {}", dir.display()), e))?;
        let path = entry.path();
        if path.is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            files.insert(name, read(&path)?);
        }
    }
    Ok(files)
}
