use base64::Engine as _;
use proptest::prelude::*;

use super::*;

/// What the reference's `encodeContinueOrDie` builds: any version, rv and start key.
fn token_of(version: &str, resource_version: i64, start: &str) -> String {
    RAW_URL.encode(go_json::write_token(
        version,
        resource_version,
        start.as_bytes(),
    ))
}

/// A token whose JSON was written by hand.
fn token_from_json(json: &str) -> String {
    RAW_URL.encode(json)
}

fn json_of(token: &str) -> String {
    String::from_utf8(RAW_URL.decode(token).unwrap()).unwrap()
}

// The reference's Test_decodeContinue, case by case.
#[test]
fn decode_continue_table() {
    type Expected = Result<(&'static str, i64), fn(&ContinueTokenError) -> bool>;
    let generic = |e: &ContinueTokenError| matches!(e, ContinueTokenError::InvalidStartKey { .. });
    let cases: Vec<(&str, String, Expected)> = vec![
        (
            "valid",
            token_of(TOKEN_VERSION, 1, "key"),
            Ok(("/test/key", 1)),
        ),
        (
            "root path",
            token_of(TOKEN_VERSION, 1, "/"),
            Ok(("/test/", 1)),
        ),
        (
            "empty version",
            token_of("", 1, "key"),
            Err(
                |e| matches!(e, ContinueTokenError::UnrecognizedVersion { version } if version.is_empty()),
            ),
        ),
        (
            "invalid version",
            token_of("v1", 1, "key"),
            Err(
                |e| matches!(e, ContinueTokenError::UnrecognizedVersion { version } if version == "v1"),
            ),
        ),
        (
            "invalid RV",
            token_of(TOKEN_VERSION, 0, "key"),
            Err(|e| *e == ContinueTokenError::InvalidStartResourceVersion),
        ),
        (
            "no start key",
            token_of(TOKEN_VERSION, 1, ""),
            Err(|e| *e == ContinueTokenError::EmptyStartKey),
        ),
        (
            "path traversal - parent",
            token_of(TOKEN_VERSION, 1, "../key"),
            Err(generic),
        ),
        (
            "path traversal - local",
            token_of(TOKEN_VERSION, 1, "./key"),
            Err(generic),
        ),
        (
            "path traversal - double parent",
            token_of(TOKEN_VERSION, 1, "./../key"),
            Err(generic),
        ),
        (
            "path traversal - after parent",
            token_of(TOKEN_VERSION, 1, "key/../.."),
            Err(generic),
        ),
    ];
    for (name, token, expected) in cases {
        let got = decode(&token, "/test/");
        match (expected, got) {
            (Ok((key, rv)), Ok((got_key, got_rv))) => {
                assert_eq!((got_key.as_str(), got_rv), (key, rv), "{name}");
            }
            (Err(check), Err(err)) => assert!(check(&err), "{name}: unexpected error {err:?}"),
            (expected, got) => panic!("{name}: expected {:?}, got {got:?}", expected.is_ok()),
        }
    }
}

#[test]
fn start_keys_that_are_not_clean_paths_are_refused() {
    for start in [
        "a//b", "key/", "//key", "/..", "..", ".", "a/./b", "a/../b", "a/..", "./", "/./a",
    ] {
        let err = decode(&token_of(TOKEN_VERSION, 1, start), "/test/").unwrap_err();
        assert_eq!(
            err,
            ContinueTokenError::InvalidStartKey {
                start: start.into()
            }
        );
        assert_eq!(
            err.to_string(),
            format!("continue key is not valid: {start}")
        );
    }
    // Dots inside a segment are fine.
    for start in ["...", "a..b", ".hidden", "a/.b/c..", "a\0"] {
        let (key, _) = decode(&token_of(TOKEN_VERSION, 1, start), "/test/").unwrap();
        assert_eq!(key, format!("/test/{start}"));
    }
    // A leading slash is dropped, as in the reference.
    let (key, _) = decode(&token_of(TOKEN_VERSION, 1, "/a/b"), "/test/").unwrap();
    assert_eq!(key, "/test/a/b");
}

#[test]
fn reference_example_tokens_are_produced_exactly_and_decode_back() {
    let token = encode("/pods/second/foo", 5, "/pods/").unwrap();
    assert_eq!(
        token,
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NSwic3RhcnQiOiJzZWNvbmQvZm9vXHUwMDAwIn0"
    );
    assert_eq!(
        json_of(&token),
        r#"{"v":"meta.k8s.io/v1","rv":5,"start":"second/foo\u0000"}"#
    );
    assert_eq!(
        decode(&token, "/pods/").unwrap(),
        ("/pods/second/foo\0".to_owned(), 5)
    );

    // Compaction recovery re-issues the decoded start key with rv -1.
    let recovered = encode_start_key("/pods/second/foo\0", -1, "/pods/").unwrap();
    assert_eq!(
        recovered,
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0Ijoic2Vjb25kL2Zvb1x1MDAwMCJ9"
    );
    assert_eq!(
        decode(&recovered, "/pods/").unwrap(),
        ("/pods/second/foo\0".to_owned(), -1)
    );
}

#[test]
fn hand_written_tokens_with_escapes_decode() {
    // {"v":"meta.k8s.io/v1","rv":42,"start":"ns/a\u003cb\u003e\u0026c/café-日本\u0000"}
    let token = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDIsInN0YXJ0IjoibnMvYVx1MDAzY2JcdTAwM2VcdTAwMjZjL2NhZsOpLeaXpeacrFx1MDAwMCJ9";
    let key = "/registry/pods/ns/a<b>&c/café-日本";
    assert_eq!(
        decode(token, "/registry/pods/").unwrap(),
        (format!("{key}\0"), 42)
    );
    assert_eq!(encode(key, 42, "/registry/pods/").unwrap(), token);

    // {"v":"meta.k8s.io/v1","rv":9,"start":"x\u2028y\tz\"q\\\u0000"}
    let token =
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6OSwic3RhcnQiOiJ4XHUyMDI4eVx0elwicVxcXHUwMDAwIn0";
    let key = "/p/x\u{2028}y\tz\"q\\";
    assert_eq!(decode(token, "/p/").unwrap(), (format!("{key}\0"), 9));
    assert_eq!(encode(key, 9, "/p/").unwrap(), token);

    // Escapes Go never writes but reads: \/, upper-case hex, a surrogate pair, raw
    // non-ASCII, whitespace between tokens.
    let json = "{ \"v\" : \"meta.k8s.io\\/v1\" ,\n \"rv\" : 3 , \"start\" : \"\\u00E9\\ud83d\\ude00\u{e9}\\u0000\" }";
    assert_eq!(
        decode(&token_from_json(json), "/p/").unwrap(),
        ("/p/é😀é\0".to_owned(), 3)
    );
}

#[test]
fn encode_escapes_exactly_as_go() {
    let key = "/p/<>&\u{2028}\u{2029}\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}\"\\é";
    let token = encode(key, 1, "/p/").unwrap();
    assert_eq!(
        json_of(&token),
        r#"{"v":"meta.k8s.io/v1","rv":1,"start":"\u003c\u003e\u0026\u2028\u2029\b\f\n\r\t\u0001\u001f"#
            .to_owned()
            + "\u{7f}\\\"\\\\é\\u0000\"}"
    );
    assert_eq!(decode(&token, "/p/").unwrap().0, format!("{key}\0"));
}

#[test]
fn encode_refuses_keys_outside_the_prefix() {
    let err = encode("/other/a", 1, "/pods/").unwrap_err();
    assert!(matches!(err, ContinueTokenError::KeyPrefixMismatch { .. }));
    assert_eq!(
        err.to_string(),
        "unable to encode next field: the key and key prefix do not match"
    );
    // Go's TrimPrefix with an empty prefix changes nothing, which it reports as a mismatch.
    assert!(matches!(
        encode("/pods/a", 1, "").unwrap_err(),
        ContinueTokenError::KeyPrefixMismatch { .. }
    ));
    assert!(encode(b"/pods/a\xff".as_slice(), 1, "/pods/").is_err());
    assert!(matches!(
        encode(b"/pods/a\xff".as_slice(), 1, "/pods/").unwrap_err(),
        ContinueTokenError::NonUtf8Key { .. }
    ));
    // Bytes that are UTF-8 are fine either way.
    assert_eq!(
        encode(b"/pods/a".as_slice(), 1, "/pods/").unwrap(),
        encode("/pods/a", 1, "/pods/").unwrap()
    );
}

#[test]
fn malformed_tokens_are_typed_errors() {
    let not_base64 = |e: &ContinueTokenError| matches!(e, ContinueTokenError::NotBase64 { .. });
    let not_json = |e: &ContinueTokenError| matches!(e, ContinueTokenError::NotJson { .. });
    for token in ["!!!!", "eyJ9=", "a", "ab=c", "e yJ9", "eyJ9\t"] {
        let err = decode(token, "/p/").unwrap_err();
        assert!(not_base64(&err), "{token:?}: {err:?}");
        assert!(err.to_string().starts_with("continue key is not valid: "));
    }
    let cases = [
        "",
        "hello",
        "[]",
        "\"meta.k8s.io/v1\"",
        "{",
        "{\"v\":\"meta.k8s.io/v1\"",
        "{\"v\":\"meta.k8s.io/v1\",}",
        "{\"v\":\"meta.k8s.io/v1\"}x",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":\"5\",\"start\":\"a\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":1.0,\"start\":\"a\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":1e2,\"start\":\"a\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":9223372036854775808,\"start\":\"a\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":01,\"start\":\"a\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":+1,\"start\":\"a\"}",
        "{\"v\":1,\"rv\":1,\"start\":\"a\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":[\"a\"]}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\u{1}\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\\x\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\\u12\"}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\",\"x\":[1,]}",
        "{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\",\"x\":tru}",
        "{'v':'meta.k8s.io/v1'}",
    ];
    for json in cases {
        let err = decode(&token_from_json(json), "/p/").unwrap_err();
        assert!(not_json(&err), "{json:?}: {err:?}");
        assert!(err.to_string().starts_with("continue key is not valid: "));
    }
    let err = decode(
        &token_from_json("{\"v\":\"meta.k8s.io/v1\",\"rv\":1}"),
        "/p/",
    )
    .unwrap_err();
    assert_eq!(err, ContinueTokenError::EmptyStartKey);
    assert_eq!(
        err.to_string(),
        "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
    );
    let err = decode(
        &token_from_json("{\"v\":\"meta.k8s.io/v1\",\"rv\":-0,\"start\":\"a\"}"),
        "/p/",
    );
    assert_eq!(err, Err(ContinueTokenError::InvalidStartResourceVersion));
    assert_eq!(
        ContinueTokenError::InvalidStartResourceVersion.to_string(),
        "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    );
    // A JSON null is a zero token, whose version Go does not recognise.
    let err = decode(&token_from_json("null"), "/p/").unwrap_err();
    assert_eq!(
        err.to_string(),
        "continue key is not valid: server does not recognize this encoded version "
    );
    let err = decode(&token_of("v2", 1, "a"), "/p/").unwrap_err();
    assert_eq!(
        err.to_string(),
        "continue key is not valid: server does not recognize this encoded version v2"
    );
}

#[test]
fn json_is_read_with_go_leniency() {
    let ok = |json: &str| decode(&token_from_json(json), "/p/");
    // Case-insensitive keys, including Go's Unicode folding (ſ folds onto S).
    assert_eq!(
        ok("{\"V\":\"meta.k8s.io/v1\",\"Rv\":2,\"START\":\"a\"}"),
        Ok(("/p/a".to_owned(), 2))
    );
    assert_eq!(
        ok("{\"v\":\"meta.k8s.io/v1\",\"rv\":2,\"\u{17f}tart\":\"a\"}"),
        Ok(("/p/a".to_owned(), 2))
    );
    // The last duplicate wins; null leaves a field as it was; unknown fields of any
    // shape are skipped.
    assert_eq!(
        ok(
            "{\"v\":\"x\",\"rv\":1,\"start\":\"a\",\"v\":\"meta.k8s.io/v1\",\"rv\":null,\"RV\":7,\"start\":null,\"other\":{\"a\":[1,{\"b\":null},\"c\"],\"d\":-1.5e3},\"e\":true}"
        ),
        Ok(("/p/a".to_owned(), 7))
    );
    // Escaped key names count.
    assert_eq!(
        ok("{\"\\u0076\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"b\"}"),
        Ok(("/p/b".to_owned(), 1))
    );
    // Lone surrogates and invalid UTF-8 become U+FFFD, one per bad byte.
    assert_eq!(
        ok("{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\\ud800\\u0041\\udc00\"}"),
        Ok(("/p/a\u{fffd}A\u{fffd}".to_owned(), 1))
    );
    let mut json = b"{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a".to_vec();
    json.extend_from_slice(b"\xe2\x82\xff\"}");
    assert_eq!(
        decode(&RAW_URL.encode(json), "/p/"),
        Ok(("/p/a\u{fffd}\u{fffd}\u{fffd}".to_owned(), 1))
    );
    // Extreme revisions fit.
    assert_eq!(
        ok("{\"v\":\"meta.k8s.io/v1\",\"rv\":-9223372036854775808,\"start\":\"a\"}"),
        Ok(("/p/a".to_owned(), i64::MIN))
    );
}

#[test]
fn base64_is_read_with_go_leniency() {
    let token = encode("/pods/second/foo", 5, "/pods/").unwrap();
    let (head, tail) = token.split_at(10);
    let wrapped = format!("{head}\r\n{tail}\n");
    assert_eq!(
        decode(&wrapped, "/pods/").unwrap(),
        decode(&token, "/pods/").unwrap()
    );
    // Go's non-strict decoder accepts non-zero trailing bits: "eyI" is `{"`, and so is
    // "eyJ", whose last two bits are not zero.
    assert_eq!(RAW_URL.decode("eyJ").unwrap(), b"{\"");
    assert_eq!(RAW_URL.decode("eyI").unwrap(), b"{\"");
}

#[test]
fn absurdly_long_and_deeply_nested_tokens_are_refused_without_harm() {
    let long = "a".repeat(MAX_TOKEN_LEN + 1);
    assert_eq!(
        decode(&long, "/p/"),
        Err(ContinueTokenError::TooLong {
            len: MAX_TOKEN_LEN + 1,
            max: MAX_TOKEN_LEN
        })
    );
    let deep = format!(
        "{{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\",\"x\":{}{}}}",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let err = decode(&token_from_json(&deep), "/p/").unwrap_err();
    assert_eq!(
        err,
        ContinueTokenError::NotJson {
            reason: "exceeded max depth".into()
        }
    );
    // Go allows 10000 levels, the token object itself included.
    let nested = |depth: usize| {
        format!(
            "{{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\",\"x\":{}{}}}",
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    assert!(decode(&token_from_json(&nested(9_999)), "/p/").is_ok());
    assert!(decode(&token_from_json(&nested(10_000)), "/p/").is_err());
}

#[test]
fn prepare_reports_remaining_items_only_for_empty_predicates() {
    let mut predicate = SelectionPredicate {
        limit: 2,
        ..SelectionPredicate::default()
    };
    assert_eq!(
        prepare("/pods/a", "/pods/", 5, 10, false, &predicate),
        Ok(None)
    );
    let page = prepare("/pods/a", "/pods/", 5, 10, true, &predicate)
        .unwrap()
        .unwrap();
    assert_eq!(page.remaining_item_count, Some(8));
    assert_eq!(
        decode(&page.continue_token, "/pods/").unwrap(),
        ("/pods/a\0".into(), 5)
    );

    predicate.label = apistore_storage::LabelSelector::parse("app=web").unwrap();
    let page = prepare("/pods/a", "/pods/", 5, 10, true, &predicate)
        .unwrap()
        .unwrap();
    assert_eq!(page.remaining_item_count, None);
    assert!(prepare("/other/a", "/pods/", 5, 10, true, &predicate).is_err());
}

/// A path segment kube-apiserver could have in a key: anything but `/`, `.`, `..`.
fn segment() -> impl Strategy<Value = String> {
    "[^/]{1,12}".prop_filter("not a dot segment", |s| s != "." && s != "..")
}

proptest! {
    #[test]
    fn decode_never_panics(token in any::<String>(), prefix in "[a-z/]{0,8}") {
        let _ = decode(&token, &prefix);
    }

    #[test]
    fn decode_never_panics_on_base64_of_anything(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&RAW_URL.encode(&data), "/p/");
    }

    #[test]
    fn decode_never_panics_on_json_like_input(json in r#"[{}\[\]":,\\ uvrstaen0-9.eE+-]{0,60}"#) {
        let _ = decode(&token_from_json(&json), "/p/");
    }

    #[test]
    fn encode_then_decode_round_trips(
        segments in proptest::collection::vec(segment(), 1..5),
        rv in any::<i64>().prop_filter("rv 0 is refused", |rv| *rv != 0),
        prefix in "/[a-z]{1,8}/",
    ) {
        let key = format!("{prefix}{}", segments.join("/"));
        let token = encode(&key, rv, &prefix).unwrap();
        prop_assert_eq!(decode(&token, &prefix).unwrap(), (format!("{key}\0"), rv));
    }

    #[test]
    fn decoded_start_keys_stay_under_the_prefix(start in "[a./\0-]{1,12}") {
        match decode(&token_of(TOKEN_VERSION, 1, &start), "/p/") {
            Ok((key, _)) => {
                prop_assert!(key.starts_with("/p/"));
                let relative = &key["/p/".len()..];
                prop_assert!(relative.split('/').all(|s| s != ".." && s != "."));
                prop_assert!(!relative.contains("//"));
            }
            Err(err) => {
                let refused = matches!(err, ContinueTokenError::InvalidStartKey { .. });
                prop_assert!(refused, "unexpected error {:?}", err);
            }
        }
    }

    #[test]
    fn clean_check_agrees_with_go_path_clean(path in "[a./]{0,10}") {
        let rooted = format!("/{}", path.strip_prefix('/').unwrap_or(&path));
        let relative = path.strip_prefix('/').unwrap_or(&path);
        prop_assert_eq!(is_clean_relative_path(relative), go_path_clean(&rooted) == rooted);
    }
}

/// Go's `path.Clean`, transcribed from its documented rules, to check
/// [`is_clean_relative_path`] against.
fn go_path_clean(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| *last != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}
