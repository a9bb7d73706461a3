//! A unified diff of two texts, line by line, for `apistore history`: the longest
//! common subsequence of lines, then hunks with three lines of context, in the format
//! `diff -u` and `kubectl diff` print. Objects are small (a few hundred YAML lines), so
//! the quadratic table is cheap; past a bound it gives up on alignment and shows the
//! whole old text removed and the new one added, which is still a correct diff.

/// Lines of unchanged context around each change.
const CONTEXT: usize = 3;
/// The largest table (old lines × new lines) aligned; larger texts are replaced whole.
const MAX_CELLS: usize = 4_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Removed,
    Added,
}

/// The unified diff from `old` to `new` under the `---`/`+++` names given; empty when
/// the texts are equal.
pub(crate) fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = align(&a, &b);
    if ops.iter().all(|(op, _, _)| *op == Op::Same) {
        return String::new();
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    let mut i = 0;
    while i < ops.len() {
        let Some(first_change) = ops[i..].iter().position(|(op, _, _)| *op != Op::Same) else {
            break;
        };
        let start = (i + first_change).saturating_sub(CONTEXT);
        // The hunk runs until CONTEXT * 2 unchanged lines in a row (or the end).
        let mut end = i + first_change;
        let mut same_run = 0;
        let mut j = end;
        while j < ops.len() {
            if ops[j].0 == Op::Same {
                same_run += 1;
                if same_run > CONTEXT * 2 {
                    break;
                }
            } else {
                same_run = 0;
                end = j;
            }
            j += 1;
        }
        let stop = (end + 1 + CONTEXT).min(ops.len());
        let hunk = &ops[start..stop];
        let old_start = hunk
            .iter()
            .find_map(|(op, x, _)| (*op != Op::Added).then_some(*x));
        let new_start = hunk
            .iter()
            .find_map(|(op, _, y)| (*op != Op::Removed).then_some(*y));
        let old_len = hunk.iter().filter(|(op, _, _)| *op != Op::Added).count();
        let new_len = hunk.iter().filter(|(op, _, _)| *op != Op::Removed).count();
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(old_start, old_len, &ops[..start], Op::Added),
            range(new_start, new_len, &ops[..start], Op::Removed),
        ));
        for (op, x, y) in hunk {
            let (mark, line) = match op {
                Op::Same => (' ', a[*x]),
                Op::Removed => ('-', a[*x]),
                Op::Added => ('+', b[*y]),
            };
            out.push(mark);
            out.push_str(line);
            out.push('\n');
        }
        i = stop;
    }
    out
}

/// `start,len` of a hunk's side (1-based); an empty side names the line before it, as
/// `diff -u` does.
fn range(start: Option<usize>, len: usize, before: &[(Op, usize, usize)], other: Op) -> String {
    let start = match start {
        Some(line) => line + 1,
        None => before.iter().filter(|(op, _, _)| *op != other).count(),
    };
    format!("{start},{len}")
}

/// The edit script from `a` to `b`: each entry an operation with its line in `a` and
/// in `b` (the one that applies).
fn align(a: &[&str], b: &[&str]) -> Vec<(Op, usize, usize)> {
    if a.len().saturating_mul(b.len()) > MAX_CELLS {
        let removed = (0..a.len()).map(|x| (Op::Removed, x, 0));
        return removed
            .chain((0..b.len()).map(|y| (Op::Added, 0, y)))
            .collect();
    }
    // lcs[x][y]: the longest common subsequence of a[x..] and b[y..].
    let width = b.len() + 1;
    let mut lcs = vec![0u32; (a.len() + 1) * width];
    for x in (0..a.len()).rev() {
        for y in (0..b.len()).rev() {
            lcs[x * width + y] = if a[x] == b[y] {
                lcs[(x + 1) * width + y + 1] + 1
            } else {
                lcs[(x + 1) * width + y].max(lcs[x * width + y + 1])
            };
        }
    }
    let (mut x, mut y) = (0, 0);
    let mut ops = Vec::with_capacity(a.len() + b.len());
    while x < a.len() || y < b.len() {
        if x < a.len() && y < b.len() && a[x] == b[y] {
            ops.push((Op::Same, x, y));
            x += 1;
            y += 1;
        } else if x < a.len()
            && (y == b.len() || lcs[(x + 1) * width + y] >= lcs[x * width + y + 1])
        {
            // Removals before additions, as `diff -u` prints a changed line.
            ops.push((Op::Removed, x, y));
            x += 1;
        } else {
            ops.push((Op::Added, x, y));
            y += 1;
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "old", "new"), "");
    }

    #[test]
    fn one_changed_line_in_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            unified(old, new, "old", "new"),
            "--- old\n+++ new\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
        );
    }

    #[test]
    fn from_and_to_nothing() {
        assert_eq!(
            unified("", "a\nb\n", "old", "new"),
            "--- old\n+++ new\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
        assert_eq!(
            unified("a\n", "", "old", "new"),
            "--- old\n+++ new\n@@ -1,1 +0,0 @@\n-a\n"
        );
    }

    #[test]
    fn distant_changes_make_two_hunks() {
        let old: String = (0..20).map(|i| format!("{i}\n")).collect();
        let new = old.replace("2\n", "two\n").replace("17\n", "seventeen\n");
        let diff = unified(&old, &new, "o", "n");
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(diff.contains("-2\n+two\n") && diff.contains("-17\n+seventeen\n"));
    }
}
