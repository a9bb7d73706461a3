//! The kube minor whose stored data apistore reads and writes.
//!
//! Which kinds and fields exist, which storage version each resource is written as and
//! where it lives all change from one kube minor to the next. One [`KubeVersion`] is
//! chosen (by the facade's builder or the command's `--kube-version`) and handed to the
//! layers that hold per-version data (the protobuf schema, the storage layout), so
//! they all answer for the same cluster.

use std::fmt;
use std::str::FromStr;

/// A kube minor apistore has data for: 1.31 to 1.37.
///
/// Ordered by release, so `v >= KubeVersion::V1_34` reads as "1.34 or newer".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum KubeVersion {
    /// Kubernetes 1.31 (k8s.io/api v0.31).
    V1_31,
    /// Kubernetes 1.32.
    V1_32,
    /// Kubernetes 1.33.
    V1_33,
    /// Kubernetes 1.34.
    V1_34,
    /// Kubernetes 1.35.
    V1_35,
    /// Kubernetes 1.36.
    V1_36,
    /// Kubernetes 1.37.
    V1_37,
}

impl KubeVersion {
    /// Every minor apistore knows, oldest first.
    pub const ALL: &'static [Self] = &[
        Self::V1_31,
        Self::V1_32,
        Self::V1_33,
        Self::V1_34,
        Self::V1_35,
        Self::V1_36,
        Self::V1_37,
    ];

    /// The newest minor apistore knows: the default wherever a version is not chosen.
    pub const LATEST: Self = Self::V1_37;

    /// The oldest minor apistore knows.
    pub const OLDEST: Self = Self::V1_31;

    /// The minor number (`37` for 1.37).
    pub const fn minor(self) -> u32 {
        match self {
            Self::V1_31 => 31,
            Self::V1_32 => 32,
            Self::V1_33 => 33,
            Self::V1_34 => 34,
            Self::V1_35 => 35,
            Self::V1_36 => 36,
            Self::V1_37 => 37,
        }
    }

    /// The version of minor `1.<minor>`, if apistore knows it.
    pub fn from_minor(minor: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.minor() == minor)
    }

    /// This version's position in [`Self::ALL`].
    pub const fn index(self) -> usize {
        // The minors are consecutive from OLDEST.
        (self.minor() - Self::OLDEST.minor()) as usize
    }

    /// The default of kube-apiserver's `WatchList` feature gate at this version: off
    /// at 1.31 (alpha), on at 1.32 (beta), off again at 1.33, on from 1.34 (the gate's
    /// versioned defaults in k8s.io/apiserver's `kube_features.go`).
    ///
    /// One gate covers both halves of a watch-list in kube-apiserver: whether a store
    /// honours `sendInitialEvents`, and whether the watch cache serves watch-lists and
    /// fills itself through one. This is the bottom crate's answer so that every layer
    /// (the backends' `ResourceConfig`, the watch cache's `CacherConfig`) takes a
    /// version's default from the same place.
    pub const fn watch_list_default(self) -> bool {
        matches!(self, Self::V1_32) || self.minor() >= Self::V1_34.minor()
    }
}

impl Default for KubeVersion {
    fn default() -> Self {
        Self::LATEST
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor())
    }
}

/// A kube version apistore does not know, or text that is not a version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseKubeVersionError {
    /// Not of the form `1.37`, `v1.37` or `1.37.2`.
    #[error(
        "{0:?} is not a kube version: expected MAJOR.MINOR such as 1.37 (a leading v and a patch number are accepted)"
    )]
    Malformed(String),
    /// A well-formed version apistore has no data for.
    #[error(
        "kube {major}.{minor} is not one apistore knows: it has schemas and layouts for 1.{oldest} to 1.{latest}"
    )]
    Unknown {
        /// The major version asked for.
        major: u32,
        /// The minor version asked for.
        minor: u32,
        /// The oldest minor known.
        oldest: u32,
        /// The newest minor known.
        latest: u32,
    },
}

impl FromStr for KubeVersion {
    type Err = ParseKubeVersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let malformed = || ParseKubeVersionError::Malformed(s.to_owned());
        let text = s.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts = text.splitn(3, '.');
        let major = parts.next().ok_or_else(malformed)?;
        let minor = parts.next().ok_or_else(malformed)?;
        // A patch (with a pre-release or build suffix) says nothing about the stored
        // data of a minor, but it has to look like one.
        if let Some(patch) = parts.next() {
            let digits = patch.bytes().take_while(u8::is_ascii_digit).count();
            let rest = &patch[digits..];
            if digits == 0 || !(rest.is_empty() || rest.starts_with(['-', '+'])) {
                return Err(malformed());
            }
        }
        let number = |t: &str| {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed());
            }
            t.parse::<u32>().map_err(|_| malformed())
        };
        let (major, minor) = (number(major)?, number(minor)?);
        let unknown = ParseKubeVersionError::Unknown {
            major,
            minor,
            oldest: Self::OLDEST.minor(),
            latest: Self::LATEST.minor(),
        };
        if major != 1 {
            return Err(unknown);
        }
        Self::from_minor(minor).ok_or(unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_people_write() {
        for (text, want) in [
            ("1.37", KubeVersion::V1_37),
            ("v1.37", KubeVersion::V1_37),
            ("1.37.2", KubeVersion::V1_37),
            ("v1.31.14", KubeVersion::V1_31),
            (" 1.34 ", KubeVersion::V1_34),
            ("1.35.0-rc.1", KubeVersion::V1_35),
        ] {
            assert_eq!(text.parse::<KubeVersion>(), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_what_it_does_not_know_and_says_the_range() {
        let err = "1.30".parse::<KubeVersion>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "kube 1.30 is not one apistore knows: it has schemas and layouts for 1.31 to 1.37"
        );
        assert!(matches!(
            "2.0".parse::<KubeVersion>(),
            Err(ParseKubeVersionError::Unknown { major: 2, .. })
        ));
        for bad in [
            "", "1", "1.", "x.y", "1.37.", "1.37.2a", "1.-3", "v", "1..37",
        ] {
            assert!(
                matches!(
                    bad.parse::<KubeVersion>(),
                    Err(ParseKubeVersionError::Malformed(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_watch_list_gate_defaults_as_kube_features_go_says() {
        let on: Vec<u32> = KubeVersion::ALL
            .iter()
            .filter(|v| v.watch_list_default())
            .map(|v| v.minor())
            .collect();
        assert_eq!(on, [32, 34, 35, 36, 37]);
    }

    #[test]
    fn displays_round_trip_and_order_by_release() {
        for &v in KubeVersion::ALL {
            assert_eq!(v.to_string().parse::<KubeVersion>(), Ok(v));
            assert_eq!(KubeVersion::ALL[v.index()], v);
        }
        assert!(KubeVersion::V1_31 < KubeVersion::V1_37);
        assert_eq!(KubeVersion::default(), KubeVersion::LATEST);
        assert_eq!(KubeVersion::LATEST, *KubeVersion::ALL.last().unwrap());
    }
}
