//! Properties of label selector parsing: no input panics, and the canonical text
//! parses back to the same selector.

use proptest::prelude::*;

use super::*;

/// Text made of selector-ish pieces, so that many samples parse.
fn selector_like() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "a",
        "b",
        "x",
        "key",
        "k8s.io/app",
        "A-1",
        "in",
        "notin",
        "(",
        ")",
        ",",
        "=",
        "==",
        "!=",
        "!",
        ">",
        "<",
        " ",
        "\t",
        "1",
        "42",
        "-",
        "_",
        ".",
        "/",
        "é",
        "\0",
        "\n",
    ]);
    prop::collection::vec(piece, 0..16).prop_map(|pieces| pieces.concat())
}

/// Valid selector text built from random requirements, with random spacing.
fn valid_selector() -> impl Strategy<Value = (String, usize)> {
    let key = prop::sample::select(vec!["a", "b", "in", "notin", "k8s.io/app", "x-1_y.z", "Z9"]);
    let value = prop::sample::select(vec!["", "a", "in", "notin", "1", "-", "v.1_b-c", "007"]);
    let space = prop::sample::select(vec!["", " ", "\t", "\r\n"]);
    let requirement = (key, 0..9usize, prop::collection::vec(value, 1..4), space).prop_map(
        |(key, op, values, sp)| {
            let number = |v: &str| {
                if v.is_empty() || v == "-" {
                    "5".to_owned()
                } else {
                    v.len().to_string()
                }
            };
            let one = if values[0] == "-" { "" } else { values[0] };
            // Empty entries are left out: the reference's list parser has quirks with runs of
            // commas (`(,,)` is an error, `(,,,)` is not), covered by the table above.
            let list = values
                .iter()
                .map(|v| v.replace('-', ""))
                .filter(|v| !v.is_empty())
                .collect::<Vec<_>>()
                .join(&format!("{sp},{sp}"));
            match op {
                0 => format!("{sp}{key}{sp}"),
                1 => format!("{sp}!{sp}{key}{sp}"),
                2 => format!("{key}{sp}={sp}{one}"),
                3 => format!("{key}{sp}=={sp}{one}"),
                4 => format!("{key}{sp}!={sp}{one}"),
                5 => format!("{key} in{sp}({sp}{list}{sp})"),
                6 => format!("{key} notin {sp}({list})"),
                7 => format!("{key}{sp}>{sp}{}", number(values[0])),
                _ => format!("{key}<{}", number(values[0])),
            }
        },
    );
    prop::collection::vec(requirement, 0..6).prop_map(|parts| {
        let count = parts.len();
        (parts.join(","), count)
    })
}

proptest! {
    #[test]
    fn valid_selectors_parse_and_round_trip((text, count) in valid_selector()) {
        let parsed = LabelSelector::parse(&text);
        prop_assert!(parsed.is_ok(), "{:?}: {:?}", text, parsed);
        let parsed = parsed.unwrap_or_default();
        prop_assert_eq!(parsed.requirements().len(), count);
        let shown = parsed.to_string();
        prop_assert_eq!(LabelSelector::parse(&shown), Ok(parsed.clone()));
        prop_assert_eq!(shown.contains(' '), parsed.requirements().iter().any(|r| matches!(r.operator(), Operator::In | Operator::NotIn)));
    }

    #[test]
    fn parsing_arbitrary_text_never_panics(text in any::<String>()) {
        let _ = LabelSelector::parse(&text);
    }

    #[test]
    fn display_reparses_to_an_equal_selector(text in selector_like()) {
        if let Ok(parsed) = LabelSelector::parse(&text) {
            let shown = parsed.to_string();
            let reparsed = LabelSelector::parse(&shown);
            prop_assert_eq!(reparsed.as_ref(), Ok(&parsed), "{:?} shown as {:?}", text, shown);
            prop_assert_eq!(reparsed.map(|s| s.to_string()), Ok(shown));
        }
    }

    #[test]
    fn matching_agrees_with_the_requirements(
        text in selector_like(),
        labels in prop::collection::btree_map("[abx]|key", "[0-9]|a|x|", 0..4),
    ) {
        if let Ok(parsed) = LabelSelector::parse(&text) {
            let all = parsed.requirements().iter().all(|r| r.matches(&labels));
            prop_assert_eq!(parsed.matches(&labels), all);
        }
    }
}
