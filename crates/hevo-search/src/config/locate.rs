//! Where a key sits in a `hevo.toml`: the line of a dotted key (for range errors found
//! after parsing; [`key_line`], shared with `harness.toml`'s errors) and the key a byte
//! offset falls in (for toml's type errors, which name the line but not the key). Both
//! read the text with `toml_edit`, which keeps spans.

use toml_edit::{ImDocument, Item, TableLike};

pub use hevo_runtime::toml_line::key_line;

/// The dotted key whose value holds byte `at` of `text` (the innermost one), if any.
pub fn key_at(text: &str, at: usize) -> Option<String> {
    let doc = ImDocument::parse(text).ok()?;
    let mut path = Vec::new();
    find(doc.as_table(), at, &mut path).then(|| path.join("."))
}

fn find(table: &dyn TableLike, at: usize, path: &mut Vec<String>) -> bool {
    for (name, item) in table.iter() {
        path.push(name.to_string());
        let hit = match item {
            Item::ArrayOfTables(a) => a.iter().any(|t| find(t, at, path)),
            _ => match item.as_table_like() {
                Some(t) => find(t, at, path),
                None => item.span().is_some_and(|s| s.contains(&at)),
            },
        };
        if hit {
            return true;
        }
        path.pop();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str =
        "seed = 1\n\n[search]\niterations = \"x\"\n\n[budget]\nmax_evaluations = 30\n\
                        [[model.backends]]\nname = \"a\"\nkind = 3\n";

    #[test]
    fn finds_the_key_holding_an_offset() {
        let at = TEXT.find("\"x\"").unwrap() + 1;
        assert_eq!(key_at(TEXT, at).as_deref(), Some("search.iterations"));
        let at = TEXT.find("kind = 3").unwrap() + 7;
        assert_eq!(key_at(TEXT, at).as_deref(), Some("model.backends.kind"));
        assert_eq!(key_at(TEXT, 0), None);
    }
}
