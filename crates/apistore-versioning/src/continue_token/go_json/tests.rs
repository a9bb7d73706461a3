use super::read::Field;
use super::*;

fn quoted(bytes: &[u8]) -> String {
    let mut out = String::new();
    write_string(&mut out, bytes);
    out
}

#[test]
fn strings_are_escaped_as_go_marshal_does() {
    let cases: &[(&[u8], &str)] = &[
        (b"", r#""""#),
        (b"plain/key-1.2_3~", r#""plain/key-1.2_3~""#),
        (b"\0", r#""\u0000""#),
        (
            b"<a href=\"x\">&amp;</a>",
            r#""\u003ca href=\"x\"\u003e\u0026amp;\u003c/a\u003e""#,
        ),
        (b"\x08\x0c\n\r\t", r#""\b\f\n\r\t""#),
        (b"\x01\x0b\x1a\x1f", r#""\u0001\u000b\u001a\u001f""#),
        (b"\x7f ~", "\"\u{7f} ~\""),
        (b"back\\slash", r#""back\\slash""#),
        (
            "\u{2028}\u{2029}\u{2027}".as_bytes(),
            "\"\\u2028\\u2029\u{2027}\"",
        ),
        ("é日本😀".as_bytes(), "\"é日本😀\""),
        // Each byte that does not start valid UTF-8 is one U+FFFD.
        (b"a\xffb", r#""a\ufffdb""#),
        (b"\xe2\x82", r#""\ufffd\ufffd""#),
        (b"\xed\xa0\x80", r#""\ufffd\ufffd\ufffd""#),
        (b"\xc0\xafz", r#""\ufffd\ufffdz""#),
        (b"\xf0\x9f\x98\x80\x80", "\"😀\\ufffd\""),
    ];
    for (input, expected) in cases {
        assert_eq!(quoted(input), *expected, "input {input:?}");
    }
}

#[test]
fn tokens_are_written_in_field_order_without_whitespace() {
    assert_eq!(
        write_token("meta.k8s.io/v1", -1, b"a\0"),
        r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"a\u0000"}"#
    );
    assert_eq!(
        write_token("meta.k8s.io/v1", i64::MAX, b""),
        r#"{"v":"meta.k8s.io/v1","rv":9223372036854775807,"start":""}"#
    );
}

#[test]
fn written_strings_read_back() {
    for input in [
        "",
        "a\0",
        "<>&\u{2028}\"\\\u{1}\u{7f}é😀",
        "\u{8}\u{c}\n\r\t",
    ] {
        let json = write_token("v", 1, input.as_bytes());
        let token = read_token(json.as_bytes()).unwrap();
        assert_eq!(token.start, input);
    }
}

#[test]
fn surrogates_are_read_as_go_does() {
    let start = |escaped: &str| {
        let json = format!(r#"{{"start":"{escaped}"}}"#);
        read_token(json.as_bytes()).map(|token| token.start)
    };
    assert_eq!(start(r"\ud83d\ude00").unwrap(), "😀");
    assert_eq!(start(r"\uD83D\uDE00").unwrap(), "😀");
    // A lone high surrogate is U+FFFD and what follows is read on its own.
    assert_eq!(start(r"\ud83dx").unwrap(), "\u{fffd}x");
    assert_eq!(start(r"\ud83d\u0041").unwrap(), "\u{fffd}A");
    assert_eq!(start(r"\ud83d\ud83d\ude00").unwrap(), "\u{fffd}😀");
    assert_eq!(start(r"\ude00").unwrap(), "\u{fffd}");
    assert_eq!(start(r"\ud83d").unwrap(), "\u{fffd}");
    // The second escape must still be valid JSON.
    assert!(start(r"\ud83d\uzzzz").is_err());
}

#[test]
fn field_names_fold_like_go() {
    for key in ["v", "V"] {
        assert!(Field::from_key(key) == Field::Version, "{key}");
    }
    for key in ["rv", "RV", "rV", "Rv"] {
        assert!(Field::from_key(key) == Field::ResourceVersion, "{key}");
    }
    for key in ["start", "START", "StArT", "\u{17f}tart", "\u{17f}TART"] {
        assert!(Field::from_key(key) == Field::Start, "{key}");
    }
    for key in ["", "vv", "r v", "starts", "ṡtart", "v\0"] {
        assert!(Field::from_key(key) == Field::Unknown, "{key}");
    }
}

#[test]
fn syntax_errors_are_reported() {
    for json in [
        "",
        " ",
        "{",
        "}",
        "{\"v\"}",
        "{\"v\":}",
        "{\"v\":\"a\" \"rv\":1}",
        "{,}",
        "[",
        "nul",
        "tru",
        "-",
        "1.",
        "1e",
        "\"abc",
        "{\"a\":\"\\",
        "{\"a\":\"\\u00\"}",
        "{} {}",
    ] {
        assert!(read_token(json.as_bytes()).is_err(), "{json:?}");
    }
    assert_eq!(
        read_token(b"{} x"),
        Err("invalid character 'x' after top-level value".to_owned())
    );
}

#[test]
fn zero_tokens_from_empty_objects_and_null() {
    assert_eq!(read_token(b"null").unwrap(), RawToken::default());
    assert_eq!(read_token(b" {} ").unwrap(), RawToken::default());
    assert_eq!(
        read_token(br#"{"rv":null,"v":null,"start":null}"#).unwrap(),
        RawToken::default()
    );
}
