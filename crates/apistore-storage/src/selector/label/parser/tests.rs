//! apimachinery's `pkg/labels/selector_test.go`: the lexer and parser tables.

use super::super::{LabelSelector, Requirement};
use super::tokens_of;
use crate::selector::{Operator, SelectorError};

fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, operator, values.iter().copied()).unwrap()
}

#[test]
fn lexer() {
    let cases = [
        ("", vec![]),
        (",", vec![","]),
        ("notin", vec!["notin"]),
        ("in", vec!["in"]),
        ("=", vec!["="]),
        ("==", vec!["=="]),
        (">", vec![">"]),
        ("<", vec!["<"]),
        ("!", vec!["!"]),
        ("!=", vec!["!="]),
        ("(", vec!["("]),
        (")", vec![")"]),
        ("~", vec!["id"]),
        ("||", vec!["id"]),
        ("key in ( value )", vec!["id", "in", "(", "id", ")"]),
        ("key notin ( value )", vec!["id", "notin", "(", "id", ")"]),
        (
            "key in ( value1, value2 )",
            vec!["id", "in", "(", "id", ",", "id", ")"],
        ),
        ("key", vec!["id"]),
        ("!key", vec!["!", "id"]),
        ("()", vec!["(", ")"]),
        ("x in (),y", vec!["id", "in", "(", ")", ",", "id"]),
        (
            "== != (), = notin",
            vec!["==", "!=", "(", ")", ",", "=", "notin"],
        ),
        ("key>2", vec!["id", ">", "id"]),
        ("key<1", vec!["id", "<", "id"]),
        ("!==<=", vec!["!=", "=", "<", "="]),
        ("a\0b", vec!["id", "id"]),
        ("a, \0b", vec!["id", ","]),
        ("!\0x", vec!["!", "id"]),
    ];
    for (text, expected) in cases {
        assert_eq!(tokens_of(text), expected, "{text:?}");
    }
}

#[test]
fn parse_operator_errors() {
    for (text, found) in [("x !", "!"), ("x exists", "exists"), ("x (", "(")] {
        let err = LabelSelector::parse(text).unwrap_err();
        assert_eq!(
            err,
            SelectorError::Parse {
                selector: text.to_owned(),
                reason: format!(
                    "unable to parse requirement: found '{found}', expected: in, notin, =, ==, !=, gt, lt"
                ),
            }
        );
    }
}

#[test]
fn set_selector_parser() {
    use Operator::*;
    // (input, expected requirements or None for a parse error)
    let cases: Vec<(&str, Option<Vec<Requirement>>)> = vec![
        ("", Some(vec![])),
        ("\rx", Some(vec![req("x", Exists, &[])])),
        (
            "this-is-a-dns.domain.com/key-with-dash",
            Some(vec![req(
                "this-is-a-dns.domain.com/key-with-dash",
                Exists,
                &[],
            )]),
        ),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            Some(vec![req(
                "this-is-another-dns.domain.com/key-with-dash",
                In,
                &["so", "what"],
            )]),
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            Some(vec![req(
                "0.1.2.domain/99",
                NotIn,
                &["10.10.100.1", "tick.tack.clock"],
            )]),
        ),
        ("foo  in\t (abc)", Some(vec![req("foo", In, &["abc"])])),
        ("x notin\n (abc)", Some(vec![req("x", NotIn, &["abc"])])),
        (
            "x  notin\t\t\t(abc,def)",
            Some(vec![req("x", NotIn, &["abc", "def"])]),
        ),
        ("x in (abc,def)", Some(vec![req("x", In, &["abc", "def"])])),
        ("x in (abc,)", Some(vec![req("x", In, &["abc", ""])])),
        ("x in ()", Some(vec![req("x", In, &[""])])),
        (
            "x notin (abc,,def),bar,z in (),w",
            Some(vec![
                req("bar", Exists, &[]),
                req("w", Exists, &[]),
                req("x", NotIn, &["abc", "", "def"]),
                req("z", In, &[""]),
            ]),
        ),
        (
            "x,y in (a)",
            Some(vec![req("x", Exists, &[]), req("y", In, &["a"])]),
        ),
        ("x=a", Some(vec![req("x", Equals, &["a"])])),
        ("x>1", Some(vec![req("x", GreaterThan, &["1"])])),
        ("x<7", Some(vec![req("x", LessThan, &["7"])])),
        (
            "x=a,y!=b",
            Some(vec![req("x", Equals, &["a"]), req("y", NotEquals, &["b"])]),
        ),
        (
            "x=a,y!=b,z in (h,i,j)",
            Some(vec![
                req("x", Equals, &["a"]),
                req("y", NotEquals, &["b"]),
                req("z", In, &["h", "i", "j"]),
            ]),
        ),
        ("x=a||y=b", None),
        ("x,,y", None),
        (",x,y", None),
        ("x nott in (y)", None),
        ("x notin ( )", Some(vec![req("x", NotIn, &[""])])),
        ("x notin (, a)", Some(vec![req("x", NotIn, &["", "a"])])),
        ("a in (xyz),", None),
        ("a in (xyz)b notin ()", None),
        ("a ", Some(vec![req("a", Exists, &[])])),
        (
            "a in (x,y,notin, z,in)",
            Some(vec![req("a", In, &["in", "notin", "x", "y", "z"])]),
        ),
        ("a in (xyz abc)", None),
        ("a notin(", None),
        ("a (", None),
        ("(", None),
        // Beyond the reference's table: NUL bytes, keywords as keys and values.
        ("\0garbage ((", Some(vec![])),
        ("x=a\0", Some(vec![req("x", Equals, &["a"])])),
        ("in in (in)", Some(vec![req("in", In, &["in"])])),
        ("x=notin", Some(vec![req("x", Equals, &["notin"])])),
        ("x in (a,,,b)", Some(vec![req("x", In, &["", "a", "b"])])),
        ("x in (,,,)", Some(vec![req("x", In, &[""])])),
        ("x in (,,)", None),
        ("x in (a,,)", None),
        ("x in (a,,,)", Some(vec![req("x", In, &["", "a"])])),
        (
            "!x,!x",
            Some(vec![
                req("x", DoesNotExist, &[]),
                req("x", DoesNotExist, &[]),
            ]),
        ),
        ("x=a b", None),
        ("x in (a) ,", None),
        ("x in (a(", None),
        ("!", None),
        ("!!x", None),
        ("x!", None),
        ("x=(", None),
        ("x>1.5", None),
        ("x>99999999999999999999", None),
        ("x/y/z", None),
        ("é=a", None),
        ("x=é", None),
    ];
    for (text, expected) in cases {
        match (LabelSelector::parse(text), expected) {
            (Ok(parsed), Some(requirements)) => {
                assert_eq!(parsed.requirements(), requirements.as_slice(), "{text:?}");
            }
            (Err(_), None) => {}
            (got, expected) => panic!("{text:?}: got {got:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn parse_errors_name_the_offending_part() {
    let reason = |text: &str| match LabelSelector::parse(text).unwrap_err() {
        SelectorError::Parse { selector, reason } => {
            assert_eq!(selector, text);
            reason
        }
        other => other.to_string(),
    };
    assert_eq!(reason("x,,y"), "found ',', expected: identifier after ','");
    assert_eq!(
        reason("x=a b"),
        "found 'b', expected: ',' or 'end of string'"
    );
    assert_eq!(
        reason(",x"),
        "found ',', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        reason("!,"),
        "unable to parse requirement: found ',', expected: identifier"
    );
    assert_eq!(
        reason("x in a"),
        "unable to parse requirement: found 'a' expected: '('"
    );
    assert_eq!(
        reason("x in (="),
        "unable to parse requirement: found '=', expected: ',', ')' or identifier"
    );
    assert_eq!(
        reason("x in (a b)"),
        "unable to parse requirement: found 'b', expected: ',' or ')'"
    );
    assert_eq!(
        reason("x in (a,="),
        "unable to parse requirement: found '=', expected: ',', or identifier"
    );
    assert_eq!(
        reason("x=("),
        "unable to parse requirement: found '(', expected: identifier"
    );
    let err = LabelSelector::parse("a=b,Bad_/k").unwrap_err();
    assert!(matches!(&err, SelectorError::InvalidLabelKey { key, .. } if key == "Bad_/k"));
    assert!(err.to_string().starts_with(
        "invalid label key \"Bad_/k\" in selector \"a=b,Bad_/k\": prefix part a lowercase RFC 1123 subdomain"
    ));
    let err = LabelSelector::parse("k in (ok,-bad)").unwrap_err();
    assert!(
        matches!(&err, SelectorError::InvalidLabelValue { key, value, .. } if key == "k" && value == "-bad")
    );
    let err = LabelSelector::parse("k>-1").unwrap_err();
    assert!(matches!(&err, SelectorError::InvalidLabelValue { value, .. } if value == "-1"));
}
