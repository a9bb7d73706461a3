//! apimachinery's `pkg/fields/selector_test.go`, table by table, and properties.

use proptest::prelude::*;

use super::*;

/// A selector, the pairs it is matched against, and whether it matches.
type MatchCase = (&'static str, &'static [(&'static str, &'static str)], bool);

/// Field, operator and raw value of a term.
type Split<'a> = (&'a str, &'a str, &'a str);

fn set(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn split_terms_table() {
    let cases: &[(&str, &[&str])] = &[
        ("a", &["a"]),
        ("a=avalue", &["a=avalue"]),
        ("a=avalue,b=bvalue", &["a=avalue", "b=bvalue"]),
        (
            "a=avalue,b==bvalue,c!=cvalue",
            &["a=avalue", "b==bvalue", "c!=cvalue"],
        ),
        ("", &[]),
        ("a=a,", &["a=a", ""]),
        (",a=a", &["", "a=a"]),
        (r"k=\,,k2=v2", &[r"k=\,", "k2=v2"]),
        (r"k=\\,k2=v2", &[r"k=\\", "k2=v2"]),
        (r"k=\\\,,k2=v2", &[r"k=\\\,", "k2=v2"]),
        (r"k=\a\b\", &[r"k=\a\b\"]),
        (r"k=\", &[r"k=\"]),
        ("함=수,목=록", &["함=수", "목=록"]),
    ];
    for (text, expected) in cases {
        assert_eq!(split_terms(text), *expected, "{text}");
    }
}

#[test]
fn split_term_table() {
    let cases: &[(&str, Option<Split<'_>>)] = &[
        ("a=value", Some(("a", "=", "value"))),
        ("b==value", Some(("b", "==", "value"))),
        ("c!=value", Some(("c", "!=", "value"))),
        ("", None),
        ("a", None),
        (r"k=\,", Some(("k", "=", r"\,"))),
        (r"k=\=", Some(("k", "=", r"\="))),
        (r"k=\\\a\b\=\,\", Some(("k", "=", r"\\\a\b\=\,\"))),
        ("함=수", Some(("함", "=", "수"))),
        ("a!!=b", Some(("a!", "!=", "b"))),
        ("=x", Some(("", "=", "x"))),
    ];
    for (term, expected) in cases {
        assert_eq!(split_term(term), *expected, "{term}");
    }
}

#[test]
fn escape_value_table() {
    let cases = [
        ("", ""),
        ("a", "a"),
        ("=", r"\="),
        (",", r"\,"),
        (r"\", r"\\"),
        (r"\=\,\", r"\\\=\\\,\\"),
    ];
    for (unescaped, escaped) in cases {
        assert_eq!(escape_value(unescaped), escaped);
        assert_eq!(unescape_value(escaped).as_deref(), Ok(unescaped));
    }
    for invalid in [r"\", r"\\\", r"\a", r"\!"] {
        let err = unescape_value(invalid).unwrap_err();
        assert!(
            err.starts_with("invalid escape sequence: \\"),
            "{invalid}: {err}"
        );
    }
    assert_eq!(
        unescape_value("a=b"),
        Err("unescaped character in value: '='".to_owned())
    );
}

#[test]
fn selector_parse() {
    for text in ["x=a,y=b,z=c", "", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"] {
        let parsed = FieldSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed.to_string(), text);
    }
    for text in [
        "x=a||y=b",
        "x==a==b",
        "x=a,b",
        "x in (a)",
        "x in (a,b,c)",
        "x",
    ] {
        assert!(FieldSelector::parse(text).is_err(), "{text}");
    }
}

#[test]
fn parse_errors_are_typed() {
    assert_eq!(
        FieldSelector::parse("a=b,x").unwrap_err(),
        SelectorError::Parse {
            selector: "a=b,x".into(),
            reason: "invalid selector: 'a=b,x'; can't understand 'x'".into(),
        }
    );
    assert_eq!(
        FieldSelector::parse(r"a=\!b").unwrap_err(),
        SelectorError::InvalidFieldValue {
            selector: r"a=\!b".into(),
            value: r"\!b".into(),
            reason: r"invalid escape sequence: \!".into(),
        }
    );
    let err = FieldSelector::parse("x==a==b").unwrap_err();
    assert!(matches!(err, SelectorError::InvalidFieldValue { ref value, .. } if value == "a==b"));
    assert_eq!(
        err.to_string(),
        "invalid field selector \"x==a==b\": unescaped character in value: '='"
    );
}

#[test]
fn deterministic_parse() {
    let a = FieldSelector::parse("x=a,a=x").unwrap();
    let b = FieldSelector::parse("a=x,x=a").unwrap();
    assert_eq!(a.to_string(), b.to_string());
    assert_eq!(a.to_string(), "a=x,x=a");
}

#[test]
fn everything() {
    assert!(FieldSelector::everything().matches(&set(&[("x", "y")])));
    assert!(FieldSelector::everything().is_empty());
    assert!(FieldSelector::from_set(&Fields::new()).is_empty());
    // Terms naming nothing are dropped, as the reference's identity transform does.
    for text in ["=", "==", "!=", ",", "=,,!="] {
        assert!(FieldSelector::parse(text).unwrap().is_empty(), "{text}");
    }
    assert_eq!(FieldSelector::parse("=,a=b").unwrap().to_string(), "a=b");
}

#[test]
fn selector_matches() {
    let cases: &[MatchCase] = &[
        ("", &[("x", "y")], true),
        ("x=y", &[("x", "y")], true),
        ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
        ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
        ("notin=in", &[("notin", "in")], true),
        ("x=y", &[("x", "z")], false),
        ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
        ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
        // A missing field compares as the empty string.
        ("x=", &[], true),
        ("x!=", &[], false),
        ("x!=y", &[], true),
        ("x=y", &[], false),
        ("=x", &[("", "x")], true),
    ];
    for (text, fields, expected) in cases {
        let parsed = FieldSelector::parse(text).unwrap();
        assert_eq!(
            parsed.matches(&set(fields)),
            *expected,
            "{text} on {fields:?}"
        );
    }
    let fields = set(&[("foo", "bar"), ("baz", "blah"), ("complex", r"=value\,\")]);
    for (text, expected) in [
        ("foo=bar", true),
        ("baz=blah", true),
        ("foo=bar,baz=blah", true),
        (r"foo=bar,baz=blah,complex=\=value\\\,\\", true),
        ("foo=blah", false),
        ("baz=bar", false),
        ("foo=bar,foobar=bar,baz=blah", false),
    ] {
        assert_eq!(
            FieldSelector::parse(text).unwrap().matches(&fields),
            expected,
            "{text}"
        );
    }
}

#[test]
fn one_term_and_set_selectors() {
    assert!(FieldSelector::one_term_equal("x", "y").matches(&set(&[("x", "y")])));
    assert!(!FieldSelector::one_term_equal("x", "y").matches(&set(&[("x", "z")])));
    assert!(FieldSelector::one_term_not_equal("x", "y").matches(&set(&[("x", "z")])));
    let labels = set(&[("foo", "bar"), ("baz", "blah")]);
    for wanted in [
        set(&[]),
        set(&[("foo", "bar")]),
        set(&[("baz", "blah")]),
        set(&[("foo", "bar"), ("baz", "blah")]),
    ] {
        assert!(
            FieldSelector::from_set(&wanted).matches(&labels),
            "{wanted:?}"
        );
    }
    for unwanted in [
        set(&[("foo", "=blah")]),
        set(&[("baz", "=bar")]),
        set(&[("foo", "=bar"), ("foobar", "bar"), ("baz", "blah")]),
    ] {
        assert!(
            !FieldSelector::from_set(&unwanted).matches(&labels),
            "{unwanted:?}"
        );
    }
    assert_eq!(
        FieldSelector::from_set(&set(&[("b", "x,y"), ("a", "=")])).to_string(),
        r"a=\=,b=x\,y"
    );
}

#[test]
fn requires_exact_match() {
    let cases: &[(FieldSelector, &str, Option<&str>)] = &[
        (FieldSelector::from_set(&Fields::new()), "test", None),
        (FieldSelector::one_term_equal("a", "b"), "test", None),
        (
            FieldSelector::one_term_equal("test", "b"),
            "test",
            Some("b"),
        ),
        (FieldSelector::one_term_equal("test", ""), "test", Some("")),
        (FieldSelector::one_term_not_equal("test", "b"), "test", None),
        (FieldSelector::one_term_not_equal("test", ""), "test", None),
        (
            FieldSelector::parse("a=b,test=b").unwrap(),
            "test",
            Some("b"),
        ),
        (
            FieldSelector::parse("test!=a,test=b").unwrap(),
            "test",
            Some("b"),
        ),
        // The first `=` term in the reference's (sorted source) order wins.
        (
            FieldSelector::parse("test=y,test==x").unwrap(),
            "test",
            Some("x"),
        ),
    ];
    for (selector, field, expected) in cases {
        assert_eq!(
            selector.requires_exact_match(field),
            *expected,
            "{selector}"
        );
    }
}

#[test]
fn display_keeps_the_reference_order_and_equality_ignores_it() {
    // Sorted by source text: "a==b" sorts before "a=a", and prints as "a=b".
    let parsed = FieldSelector::parse("a=a,a==b").unwrap();
    assert_eq!(parsed.to_string(), "a=b,a=a");
    assert_eq!(FieldSelector::parse(&parsed.to_string()).unwrap(), parsed);
    assert_ne!(parsed, FieldSelector::parse("a=a").unwrap());
}

fn selector_like() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "a",
        "b",
        "metadata.name",
        "x",
        "=",
        "==",
        "!=",
        "!",
        ",",
        "\\",
        "\\,",
        "\\=",
        "\\\\",
        " ",
        "함",
        "1",
        "",
    ]);
    prop::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn parsing_arbitrary_text_never_panics(text in any::<String>()) {
        let _ = FieldSelector::parse(&text);
    }

    #[test]
    fn display_reparses_to_an_equal_selector(text in selector_like()) {
        if let Ok(parsed) = FieldSelector::parse(&text) {
            let shown = parsed.to_string();
            let reparsed = FieldSelector::parse(&shown);
            prop_assert_eq!(reparsed.as_ref(), Ok(&parsed), "{:?} shown as {:?}", text, shown);
            // After one round the text is canonical (the first round may reorder terms
            // written with `==`, which print as `=`).
            let canonical = reparsed.map(|s| s.to_string()).unwrap_or_default();
            let again = FieldSelector::parse(&canonical).map(|s| s.to_string());
            prop_assert_eq!(again, Ok(canonical));
        }
    }

    #[test]
    fn escaping_round_trips(value in any::<String>()) {
        prop_assert_eq!(unescape_value(&escape_value(&value)), Ok(value.clone()));
        let selector = FieldSelector::one_term_equal("f", &value);
        let fields = Fields::from([("f".to_owned(), value)]);
        let reparsed = FieldSelector::parse(&selector.to_string()).unwrap();
        prop_assert!(reparsed.matches(&fields) || reparsed.is_empty());
    }
}
