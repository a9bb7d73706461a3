//! The etcd versions the suite runs against: Debian's 3.4 (the default, provisioned as
//! [`provision::etcd`] does), and 3.5, 3.6 and 3.7 built from the Go module proxy.
//!
//! Each built line is a Go module of a few lines over etcd's own `etcdmain`, in
//! `interop/etcd/<line>/`; its `go.mod` pins the release. The binary goes to
//! `target/tools/etcd-<release>/etcd` with the release recorded beside it, and is built
//! again only when the pin moves or the record does not match.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Result, XtaskError};
use crate::go::Go;
use crate::provision;

/// The module whose version `interop/etcd/<line>/go.mod` pins.
const SERVER_MODULE: &str = "go.etcd.io/etcd/server/v3";

/// An etcd minor release line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum EtcdVersion {
    /// etcd 3.4: Debian's package (`etcd-server`, 3.4.23), or whatever etcd the
    /// environment names.
    V3_4,
    /// etcd 3.5, built from `interop/etcd/3.5/`.
    V3_5,
    /// etcd 3.6, built from `interop/etcd/3.6/`.
    V3_6,
    /// etcd 3.7, built from `interop/etcd/3.7/`: the first line that answers
    /// `RangeStream`, which the etcd3 backend lists with when it can.
    V3_7,
}

impl EtcdVersion {
    /// Every line, oldest first: what `cargo xtask interop` runs by default.
    pub(crate) const ALL: [Self; 4] = [Self::V3_4, Self::V3_5, Self::V3_6, Self::V3_7];

    /// `"3.4"`, `"3.5"`, `"3.6"` or `"3.7"`.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|version| version.as_str() == text)
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::V3_4 => "3.4",
            Self::V3_5 => "3.5",
            Self::V3_6 => "3.6",
            Self::V3_7 => "3.7",
        }
    }

    /// The Go module that builds this line, relative to the workspace root; `None` for
    /// the line taken from the system.
    fn module_dir(self) -> Option<&'static str> {
        match self {
            Self::V3_4 => None,
            Self::V3_5 => Some("interop/etcd/3.5"),
            Self::V3_6 => Some("interop/etcd/3.6"),
            Self::V3_7 => Some("interop/etcd/3.7"),
        }
    }

    /// Whether building this line needs Go.
    pub(crate) fn needs_go(self) -> bool {
        self.module_dir().is_some()
    }
}

impl fmt::Display for EtcdVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The etcd binary of `version`: Debian's (checked to be a 3.4), or one built from its
/// module (cached). `go` is needed for the built lines.
pub(crate) fn provision_etcd(
    root: &Path,
    version: EtcdVersion,
    go: Option<&Go>,
) -> Result<PathBuf> {
    let Some(module_dir) = version.module_dir() else {
        let binary = provision::etcd()?;
        let reported = provision::etcd_version(&binary);
        if !reports_line(&reported, version) {
            return Err(XtaskError::EtcdMissing(format!(
                "--etcd {version} wants an etcd {version}.x, but {} says `{reported}`; set \
                 APISTORE_ETCD_BIN to an etcd {version} binary (Debian's etcd-server is \
                 3.4.23)",
                binary.display()
            )));
        }
        return Ok(binary);
    };
    let Some(go) = go else {
        return Err(XtaskError::GoMissing(format!(
            "etcd {version} is built from {module_dir} and needs Go"
        )));
    };
    let module_dir = root.join(module_dir);
    let go_mod = module_dir.join("go.mod");
    let text = fs::read_to_string(&go_mod)
        .map_err(|e| XtaskError::io(format!("read {}", go_mod.display()), e))?;
    let release = pinned_release(&text).ok_or_else(|| {
        XtaskError::EtcdMissing(format!(
            "{} pins no `{SERVER_MODULE} v3.x.y`",
            go_mod.display()
        ))
    })?;
    let dir = root
        .join(provision::TOOLS_DIR)
        .join(format!("etcd-{release}"));
    let binary = dir.join("etcd");
    let record = dir.join("version");
    let recorded = fs::read_to_string(&record).unwrap_or_default();
    if binary.is_file() && recorded.trim() == release {
        println!("xtask: etcd {release}: {} (built before)", binary.display());
        return Ok(binary);
    }
    println!(
        "xtask: building etcd {release} from {}",
        module_dir.display()
    );
    fs::create_dir_all(&dir).map_err(|e| XtaskError::io(format!("create {}", dir.display()), e))?;
    // As etcd's own release builds: static, no cgo, paths trimmed.
    go.build(
        &module_dir,
        &binary,
        &[("CGO_ENABLED", "0")],
        &["-trimpath"],
    )?;
    let reported = provision::etcd_version(&binary);
    if reported != format!("etcd Version: {release}") {
        return Err(XtaskError::EtcdMissing(format!(
            "{} was built from {} pinning {release} but says `{reported}`",
            binary.display(),
            go_mod.display()
        )));
    }
    fs::write(&record, format!("{release}\n"))
        .map_err(|e| XtaskError::io(format!("write {}", record.display()), e))?;
    println!("xtask: etcd {release}: {}", binary.display());
    Ok(binary)
}

/// The release `go.mod` pins for [`SERVER_MODULE`], without its `v`: `3.5.35` from
/// `require go.etcd.io/etcd/server/v3 v3.5.35` (or the same line inside a
/// `require ( ... )` block).
fn pinned_release(go_mod: &str) -> Option<&str> {
    go_mod.lines().find_map(|line| {
        let line = line.split("//").next().unwrap_or_default().trim();
        let line = line.strip_prefix("require").map_or(line, str::trim_start);
        let mut words = line.split_whitespace();
        if words.next() != Some(SERVER_MODULE) {
            return None;
        }
        let release = words.next()?.strip_prefix('v')?;
        let numeric = release.split('.').count() == 3
            && release
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        numeric.then_some(release)
    })
}

/// Whether `etcd --version`'s first line names a release of `version`'s line.
fn reports_line(reported: &str, version: EtcdVersion) -> bool {
    reported
        .strip_prefix("etcd Version: ")
        .and_then(|release| release.strip_prefix(version.as_str()))
        .is_some_and(|rest| rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_print() {
        for version in EtcdVersion::ALL {
            assert_eq!(EtcdVersion::parse(version.as_str()), Some(version));
            assert_eq!(version.to_string(), version.as_str());
        }
        for bad in ["3", "3.3", "3.8", "v3.7", "3.7.3", ""] {
            assert_eq!(EtcdVersion::parse(bad), None, "{bad:?}");
        }
        assert!(!EtcdVersion::V3_4.needs_go());
        assert!(EtcdVersion::V3_5.needs_go() && EtcdVersion::V3_6.needs_go());
        assert!(EtcdVersion::V3_7.needs_go());
        assert_eq!(EtcdVersion::parse("3.7"), Some(EtcdVersion::V3_7));
    }

    #[test]
    fn the_pin_is_read_from_go_mod() {
        let single = "module x\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v3.5.35\n\n\
                      require (\n\tgo.etcd.io/etcd/api/v3 v3.5.35 // indirect\n)\n";
        assert_eq!(pinned_release(single), Some("3.5.35"));
        let block = "module x\nrequire (\n\tgo.etcd.io/etcd/api/v3 v3.6.16\n\
                     \tgo.etcd.io/etcd/server/v3 v3.6.16 // pinned\n)\n";
        assert_eq!(pinned_release(block), Some("3.6.16"));
        let ours = include_str!("../../interop/etcd/3.7/go.mod");
        assert_eq!(pinned_release(ours), Some("3.7.3"));
        assert_eq!(pinned_release("module x\n"), None);
        assert_eq!(
            pinned_release("require go.etcd.io/etcd/server/v3 v3.6.0-rc.1\n"),
            None
        );
    }

    #[test]
    fn the_line_is_checked_from_the_reported_version() {
        assert!(reports_line("etcd Version: 3.4.23", EtcdVersion::V3_4));
        assert!(!reports_line("etcd Version: 3.5.35", EtcdVersion::V3_4));
        assert!(!reports_line("etcd Version: 3.40.1", EtcdVersion::V3_4));
        assert!(reports_line("etcd Version: 3.7.3", EtcdVersion::V3_7));
        assert!(!reports_line("etcd Version: 3.7.3", EtcdVersion::V3_6));
        assert!(!reports_line("version unknown", EtcdVersion::V3_4));
    }
}
