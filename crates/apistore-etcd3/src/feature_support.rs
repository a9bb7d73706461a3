//! Which etcd versions can be trusted with a feature, after kube-apiserver's
//! `pkg/storage/feature/feature_support_checker.go`.
//!
//! The one feature checked is `RequestWatchProgress`: asking etcd for a progress
//! notification on demand. etcd answers such requests from 3.4 on, but before 3.4.31 and,
//! in the 3.5 line, before 3.5.13, the answer could claim a revision that events still on
//! their way had not reached (etcd issues 15220 and 17507). kube-apiserver's watch cache
//! only relies on the feature when every etcd endpoint runs a fixed version; the store's
//! own `RequestWatchProgress` forwards the request whatever the version, and so does ours.

use std::sync::Mutex;

/// A feature whose support depends on the etcd version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum EtcdFeature {
    /// Progress notifications on request (kube-apiserver's `storage.RequestWatchProgress`).
    RequestWatchProgress,
}

/// Remembers what the etcd endpoints of a client said about their version.
///
/// Like kube-apiserver's checker: nothing is supported until an endpoint was checked;
/// one endpoint with an unfit (or unreadable) version turns the feature off for good;
/// an endpoint that could not be asked changes nothing.
#[derive(Debug, Default)]
pub(crate) struct FeatureSupportChecker {
    request_watch_progress: Mutex<Option<bool>>,
}

impl FeatureSupportChecker {
    /// Whether the feature is supported, as far as the checks so far tell.
    pub(crate) fn supports(&self, feature: EtcdFeature) -> bool {
        match feature {
            EtcdFeature::RequestWatchProgress => self
                .request_watch_progress
                .lock()
                .map(|state| state.unwrap_or(false))
                .unwrap_or(false),
        }
    }

    /// Records the answer of one endpoint to a status request: its version, or why it
    /// could not be asked (kube-apiserver's `clientSupportsRequestWatchProgress`).
    pub(crate) fn record_endpoint(
        &self,
        endpoint: &str,
        version: Result<&str, String>,
    ) -> Result<(), String> {
        let version = version.map_err(|err| {
            format!("failed checking etcd version, endpoint: {endpoint:?}: {err}")
        })?;
        let supported = version_supports_request_watch_progress(version);
        if let Ok(mut state) = self.request_watch_progress.lock() {
            if !supported {
                *state = Some(false);
            } else if state.is_none() {
                *state = Some(true);
            }
        }
        Ok(())
    }
}

/// Whether an etcd of this version answers progress requests correctly: 3.4.31 and
/// later 3.4 releases, 3.5.13 and later, and anything newer. A version that does not
/// parse as semantic versioning is not trusted.
pub(crate) fn version_supports_request_watch_progress(version: &str) -> bool {
    let Some(version) = SemVer::parse(version) else {
        return false;
    };
    let v3_4_31 = SemVer::release(3, 4, 31);
    let v3_5_0 = SemVer::release(3, 5, 0);
    let v3_5_13 = SemVer::release(3, 5, 13);
    !(version < v3_4_31 || (version >= v3_5_0 && version < v3_5_13))
}

/// A semantic version, compared as semantic versioning orders them, as far as the
/// checks above need: a pre-release sorts before its release.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SemVer {
    core: (u64, u64, u64),
    /// `false` for a pre-release, so that it sorts before the release.
    release: bool,
    pre: Vec<PreIdentifier>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum PreIdentifier {
    // Numeric identifiers sort before alphanumeric ones.
    Numeric(u64),
    Text(String),
}

impl SemVer {
    fn release(major: u64, minor: u64, patch: u64) -> Self {
        Self {
            core: (major, minor, patch),
            release: true,
            pre: Vec::new(),
        }
    }

    /// Parses `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]` strictly (no leading zeros, no
    /// missing components), as Kubernetes' `version.ParseSemantic` does.
    fn parse(text: &str) -> Option<Self> {
        let without_build = match text.split_once('+') {
            Some((head, build)) => {
                if !build.split('.').all(valid_identifier) {
                    return None;
                }
                head
            }
            None => text,
        };
        let (core, pre) = match without_build.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (without_build, None),
        };
        let mut numbers = core.split('.').map(parse_number);
        let major = numbers.next()??;
        let minor = numbers.next()??;
        let patch = numbers.next()??;
        if numbers.next().is_some() {
            return None;
        }
        let pre = match pre {
            None => Vec::new(),
            Some(pre) => pre
                .split('.')
                .map(|id| {
                    if !valid_identifier(id) {
                        None
                    } else if id.bytes().all(|b| b.is_ascii_digit()) {
                        parse_number(id).map(PreIdentifier::Numeric)
                    } else {
                        Some(PreIdentifier::Text(id.to_owned()))
                    }
                })
                .collect::<Option<Vec<_>>>()?,
        };
        Some(Self {
            core: (major, minor, patch),
            release: pre.is_empty(),
            pre,
        })
    }
}

fn valid_identifier(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// A numeric component: digits only, no leading zero.
fn parse_number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if text.len() > 1 && text.starts_with('0') {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // TestSupports: nothing is supported before a check.
    #[test]
    fn nothing_is_supported_before_a_check() {
        let checker = FeatureSupportChecker::default();
        assert!(!checker.supports(EtcdFeature::RequestWatchProgress));
    }

    #[test]
    fn version_bounds_follow_the_reference() {
        for (version, want) in [
            ("3.4.31", true),
            ("3.4.32", true),
            ("3.5.13", true),
            ("3.5.14", true),
            ("3.6.0", true),
            ("4.0.0", true),
            ("3.4.30", false),
            // Debian's etcd, the one the tests run against.
            ("3.4.23", false),
            ("3.4.0", false),
            ("3.5.0", false),
            ("3.5.12", false),
            ("3.5.13-rc.0", false),
            ("3.4.31+build.5", true),
            ("3.4.--aaa", false),
            ("3.5", false),
            ("v3.5.13", false),
            ("03.5.13", false),
            ("", false),
        ] {
            assert_eq!(
                version_supports_request_watch_progress(version),
                want,
                "{version:?}"
            );
        }
    }

    #[test]
    fn pre_releases_sort_before_their_release() {
        let rc = SemVer::parse("3.5.13-rc.1").unwrap();
        let rc2 = SemVer::parse("3.5.13-rc.2").unwrap();
        let alpha = SemVer::parse("3.5.13-alpha").unwrap();
        let numeric = SemVer::parse("3.5.13-1").unwrap();
        let release = SemVer::parse("3.5.13").unwrap();
        assert!(rc < release);
        assert!(rc < rc2);
        assert!(numeric < alpha);
        assert!(SemVer::parse("3.5.12").unwrap() < rc);
    }

    /// One round of TestSupportsRequestWatchProgress: endpoints and their answers, the
    /// errors expected, and what `supports` says afterwards.
    type Round<'a> = (&'a [(&'a str, Result<&'a str, &'a str>)], bool);

    // TestSupportsRequestWatchProgress, round by round.
    #[test]
    fn supports_request_watch_progress_rounds() {
        let cases: Vec<(&str, Vec<Round<'_>>)> = vec![
            ("default disabled", vec![(&[], false)]),
            (
                "supported versions bound",
                vec![
                    (&[("localhost:2390", Ok("3.4.31"))], true),
                    (&[("localhost:2391", Ok("3.5.13"))], true),
                    (&[("localhost:2392", Ok("3.6.0"))], true),
                ],
            ),
            ("3.4.30", vec![(&[("localhost:2390", Ok("3.4.30"))], false)]),
            ("3.5.0", vec![(&[("localhost:2390", Ok("3.5.0"))], false)]),
            ("3.5.12", vec![(&[("localhost:2390", Ok("3.5.12"))], false)]),
            (
                "one endpoint without support disables",
                vec![(
                    &[
                        ("localhost:2390", Ok("3.5.13")),
                        ("localhost:2391", Ok("3.5.10")),
                    ],
                    false,
                )],
            ),
            (
                "all endpoints without support",
                vec![(
                    &[
                        ("localhost:2390", Ok("3.5.9")),
                        ("localhost:2391", Ok("3.5.10")),
                    ],
                    false,
                )],
            ),
            (
                "all endpoints with support",
                vec![(
                    &[
                        ("localhost:2390", Ok("3.4.31")),
                        ("localhost:2391", Ok("3.5.13")),
                        ("localhost:2392", Ok("3.5.14")),
                        ("localhost:2393", Ok("3.6.0")),
                    ],
                    true,
                )],
            ),
            (
                "a later unsupported client disables for good",
                vec![
                    (&[("localhost:2390", Ok("3.6.0"))], true),
                    (&[("localhost:2392", Ok("3.4.0"))], false),
                ],
            ),
            (
                "a malformed version disables for good",
                vec![
                    (&[("localhost:2390", Ok("3.6.0"))], true),
                    (&[("localhost:2392", Ok("3.4.--aaa"))], false),
                    (&[("localhost:2393", Ok("3.5.13"))], false),
                ],
            ),
            (
                "an error changes nothing, a later success enables",
                vec![
                    (&[("localhost:2390", Err("some error"))], false),
                    (&[("localhost:2391", Ok("3.5.14"))], true),
                ],
            ),
            (
                "an error keeps an earlier success, a later unsupported version disables",
                vec![
                    (&[("localhost:2390", Ok("3.6.0"))], true),
                    (&[("localhost:2391", Err("some error"))], true),
                    (&[("localhost:2392", Ok("3.5.10"))], false),
                ],
            ),
        ];
        for (name, rounds) in cases {
            let checker = FeatureSupportChecker::default();
            for (endpoints, want) in rounds {
                for (endpoint, answer) in endpoints {
                    let got = checker.record_endpoint(endpoint, answer.map_err(str::to_owned));
                    match answer {
                        Ok(_) => assert_eq!(got, Ok(()), "{name}"),
                        Err(err) => assert_eq!(
                            got,
                            Err(format!(
                                "failed checking etcd version, endpoint: {endpoint:?}: {err}"
                            )),
                            "{name}"
                        ),
                    }
                }
                assert_eq!(
                    checker.supports(EtcdFeature::RequestWatchProgress),
                    want,
                    "{name}"
                );
            }
        }
    }
}
