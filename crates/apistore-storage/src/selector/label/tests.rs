//! apimachinery's `pkg/labels/selector_test.go`: matching, requirements and text.
//! The grammar tables are beside the parser.

use super::*;

/// A selector, the pairs it is matched against, and whether it matches.
type MatchCase = (&'static str, &'static [(&'static str, &'static str)], bool);

fn set(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, operator, values.iter().copied()).unwrap()
}

fn selector(requirements: Vec<Requirement>) -> LabelSelector {
    LabelSelector::everything().with_requirements(requirements)
}

#[test]
fn selector_parse() {
    let good = [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        "x=",
        "x= ",
        "x=,z= ",
        "x= ,z= ",
        "!x",
        "x>1",
        "x>1,z<5",
    ];
    for text in good {
        let parsed = LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed.to_string(), text.replace(' ', ""), "{text}");
    }
    for text in ["x=a||y=b", "x==a==b", "!x=a", "x<a"] {
        assert!(LabelSelector::parse(text).is_err(), "{text}");
    }
}

#[test]
fn deterministic_parse() {
    let a = LabelSelector::parse("x=a,a=x").unwrap();
    let b = LabelSelector::parse("a=x,x=a").unwrap();
    assert_eq!(a.to_string(), b.to_string());
    assert_eq!(a, b);
}

#[test]
fn everything() {
    assert!(LabelSelector::everything().matches(&set(&[("x", "y")])));
    assert!(LabelSelector::everything().is_empty());
    assert!(LabelSelector::from_set(&Labels::new()).is_empty());
}

#[test]
fn selector_matches() {
    let cases: &[MatchCase] = &[
        ("", &[("x", "y")], true),
        ("x=y", &[("x", "y")], true),
        ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
        ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
        ("notin=in", &[("notin", "in")], true),
        ("x", &[("x", "z")], true),
        ("!x", &[("y", "z")], true),
        ("x>1", &[("x", "2")], true),
        ("x<1", &[("x", "0")], true),
        ("x=z", &[], false),
        ("x=y", &[("x", "z")], false),
        ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
        ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
        ("x", &[("y", "z")], false),
        ("!x", &[("x", "z")], false),
        ("x>1", &[("x", "0")], false),
        ("x<1", &[("x", "2")], false),
        // `!=` and `notin` match objects lacking the key.
        ("x!=y", &[], true),
        ("x notin (a)", &[], true),
        ("x in (a)", &[], false),
        // `>`/`<` need the key, with an integer value.
        ("x>1", &[], false),
        ("x<1", &[("x", "v0")], false),
        ("x>-1", &[], false),
        ("x<10", &[("x", "-5")], true),
        ("x>1", &[("x", "+2")], true),
    ];
    for (text, labels, expected) in cases {
        match LabelSelector::parse(text) {
            Ok(parsed) => assert_eq!(
                parsed.matches(&set(labels)),
                *expected,
                "{text} on {labels:?}"
            ),
            // `x>-1` does not parse: "-1" is not a valid label value.
            Err(_) => assert_eq!(*text, "x>-1"),
        }
    }
    let labels = set(&[("foo", "bar"), ("baz", "blah")]);
    for (text, expected) in [
        ("foo=bar", true),
        ("baz=blah", true),
        ("foo=bar,baz=blah", true),
        ("foo=blah", false),
        ("baz=bar", false),
        ("foo=bar,foobar=bar,baz=blah", false),
    ] {
        assert_eq!(
            LabelSelector::parse(text).unwrap().matches(&labels),
            expected,
            "{text}"
        );
    }
}

#[test]
fn set_matches() {
    let labels = set(&[("foo", "bar"), ("baz", "blah")]);
    for wanted in [
        set(&[]),
        set(&[("foo", "bar")]),
        set(&[("baz", "blah")]),
        set(&[("foo", "bar"), ("baz", "blah")]),
    ] {
        assert!(
            LabelSelector::from_set(&wanted).matches(&labels),
            "{wanted:?}"
        );
    }
    assert!(!LabelSelector::from_set(&set(&[("foo", "=blah")])).matches(&labels));
    assert_eq!(
        LabelSelector::from_set(&set(&[("app", "foo"), ("a", "b")])).to_string(),
        "a=b,app=foo"
    );
}

#[test]
fn requirement_constructor() {
    let ok: &[(&str, Operator, &[&str])] = &[
        ("x3", Operator::In, &["foo"]),
        ("x4", Operator::NotIn, &["foo"]),
        ("x6", Operator::Exists, &[]),
        ("x7", Operator::DoesNotExist, &[]),
        ("x9", Operator::In, &["bar"]),
        ("x11", Operator::GreaterThan, &["1"]),
        ("x12", Operator::LessThan, &["6"]),
    ];
    for (key, operator, values) in ok {
        assert!(
            Requirement::new(key, *operator, values.iter().copied()).is_ok(),
            "{key}"
        );
    }
    let long = "a".repeat(254);
    let bad: &[(&str, Operator, &[&str], &str)] = &[
        ("x1", Operator::In, &[], "requirement"),
        ("x2", Operator::NotIn, &[], "requirement"),
        ("x5", Operator::Equals, &["foo", "bar"], "requirement"),
        ("x8", Operator::Exists, &["foo"], "requirement"),
        ("x13", Operator::GreaterThan, &[], "requirement"),
        ("x14", Operator::GreaterThan, &["bar"], "value"),
        ("x15", Operator::LessThan, &["bar"], "value"),
        (&long, Operator::Exists, &[], "key"),
        ("x16", Operator::Equals, &[&long], "value"),
        ("x17", Operator::Equals, &["a b"], "value"),
    ];
    for (key, operator, values, kind) in bad {
        let err = Requirement::new(key, *operator, values.iter().copied()).unwrap_err();
        let got = match err {
            SelectorError::InvalidRequirement { .. } => "requirement",
            SelectorError::InvalidLabelValue { .. } => "value",
            SelectorError::InvalidLabelKey { .. } => "key",
            _ => "other",
        };
        assert_eq!(got, *kind, "{key}: {err}");
    }
    let err = Requirement::new("x14", Operator::GreaterThan, ["bar"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid value \"bar\" for label \"x14\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
}

#[test]
fn to_string() {
    let cases = [
        (
            vec![
                req("x", Operator::In, &["abc", "def"]),
                req("y", Operator::NotIn, &["jkl"]),
                req("z", Operator::Exists, &[]),
            ],
            "x in (abc,def),y notin (jkl),z",
        ),
        (
            vec![
                req("x", Operator::NotIn, &["abc", "def"]),
                req("y", Operator::NotEquals, &["jkl"]),
                req("z", Operator::DoesNotExist, &[]),
            ],
            "x notin (abc,def),y!=jkl,!z",
        ),
        (
            vec![
                req("x", Operator::NotIn, &["abc"]),
                req("y", Operator::In, &["jkl", "mno"]),
                req("z", Operator::NotIn, &[""]),
            ],
            "x notin (abc),y in (jkl,mno),z notin ()",
        ),
        (
            vec![
                req("x", Operator::Equals, &["abc"]),
                req("y", Operator::DoubleEquals, &["jkl"]),
                req("z", Operator::NotEquals, &["a"]),
                req("z", Operator::Exists, &[]),
            ],
            "x=abc,y==jkl,z!=a,z",
        ),
        (
            vec![
                req("x", Operator::GreaterThan, &["2"]),
                req("y", Operator::LessThan, &["8"]),
                req("z", Operator::Exists, &[]),
            ],
            "x>2,y<8,z",
        ),
        (
            vec![req("x", Operator::In, &["def", "abc", "def"])],
            "x in (abc,def)",
        ),
    ];
    for (requirements, expected) in cases {
        assert_eq!(selector(requirements).to_string(), expected);
    }
}

#[test]
fn requirement_selector_matching() {
    let cases = [
        (
            set(&[("x", "foo"), ("y", "baz")]),
            vec![
                req("x", Operator::In, &["foo"]),
                req("y", Operator::NotIn, &["alpha"]),
            ],
            true,
        ),
        (
            set(&[("x", "foo"), ("y", "baz")]),
            vec![
                req("x", Operator::In, &["foo"]),
                req("y", Operator::In, &["alpha"]),
            ],
            false,
        ),
        (
            set(&[("y", "")]),
            vec![
                req("x", Operator::NotIn, &[""]),
                req("y", Operator::Exists, &[]),
            ],
            true,
        ),
        (
            set(&[("y", "")]),
            vec![
                req("x", Operator::DoesNotExist, &[]),
                req("y", Operator::Exists, &[]),
            ],
            true,
        ),
        (
            set(&[("y", "")]),
            vec![
                req("x", Operator::NotIn, &[""]),
                req("y", Operator::DoesNotExist, &[]),
            ],
            false,
        ),
        (
            set(&[("y", "baz")]),
            vec![req("x", Operator::In, &[""])],
            false,
        ),
        (
            set(&[("z", "2")]),
            vec![req("z", Operator::GreaterThan, &["1"])],
            true,
        ),
        (
            set(&[("z", "v2")]),
            vec![req("z", Operator::GreaterThan, &["1"])],
            false,
        ),
    ];
    for (labels, requirements, expected) in cases {
        let selector = selector(requirements);
        assert_eq!(
            selector.matches(&labels),
            expected,
            "{selector} on {labels:?}"
        );
    }
}

#[test]
fn add_keeps_requirements_sorted() {
    let one = LabelSelector::everything().with_requirements([req("key", Operator::In, &["value"])]);
    assert_eq!(one.to_string(), "key in (value)");
    let two = one.with_requirements([req("a", Operator::Equals, &["b"])]);
    assert_eq!(two.to_string(), "a=b,key in (value)");
}

#[test]
fn requires_exact_match() {
    use Operator::*;
    let cases = [
        (vec![req("key", In, &["value"])], "key", Some("value")),
        (vec![req("key", In, &["value", "value2"])], "key", None),
        (
            vec![
                req("key", In, &["value", "value1"]),
                req("key2", In, &["value2"]),
            ],
            "key2",
            Some("value2"),
        ),
        (vec![req("key", Equals, &["value"])], "key", Some("value")),
        (
            vec![req("key", DoubleEquals, &["value"])],
            "key",
            Some("value"),
        ),
        (vec![req("key", NotEquals, &["value"])], "key", None),
        (
            vec![req("key", In, &["value"]), req("key2", In, &["value2"])],
            "key",
            Some("value"),
        ),
        // Only the first requirement on the key counts.
        (
            vec![req("key", Exists, &[]), req("key", Equals, &["v"])],
            "key",
            None,
        ),
        (vec![], "key", None),
    ];
    for (requirements, label, expected) in cases {
        let selector = selector(requirements);
        assert_eq!(selector.requires_exact_match(label), expected, "{selector}");
    }
}

#[test]
fn validated_from_set() {
    let ok = LabelSelector::validated_from_set(&set(&[("key", "val")])).unwrap();
    assert_eq!(ok.requirements(), &[req("key", Operator::Equals, &["val"])]);
    let long = "axahm2EJ8Phiephe2eixohbee9eGeiyees1thuozi1xoh0GiuH3diewi8iem7Nui";
    let err = LabelSelector::validated_from_set(&set(&[("Key", long)])).unwrap_err();
    assert!(matches!(err, SelectorError::InvalidLabelValue { ref key, .. } if key == "Key"));
}
