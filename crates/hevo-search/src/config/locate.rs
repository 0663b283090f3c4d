//! Where a key sits in a `hevo.toml`: the line of a dotted key (for range errors found
//! after parsing) and the key a byte offset falls in (for toml's type errors, which name
//! the line but not the key). Both read the text with `toml_edit`, which keeps spans.

use toml_edit::{ImDocument, Item, TableLike};

/// The 1-based line of `dotted` (e.g. `budget.max_evaluations`, or
/// `model.backends.1.api_key_env` for a key of the second `[[model.backends]]`) in `text`,
/// if it is there.
pub fn key_line(text: &str, dotted: &str) -> Option<usize> {
    let doc = ImDocument::parse(text).ok()?;
    let mut table: &dyn TableLike = doc.as_table();
    let mut parts = dotted.split('.').peekable();
    while let Some(part) = parts.next() {
        let (key, item) = table.get_key_value(part)?;
        if parts.peek().is_none() {
            let at = key.span().or_else(|| item.span())?.start;
            return Some(hevo_runtime::suite::line_of(text, at));
        }
        table = match item {
            Item::ArrayOfTables(array) => {
                let entry = array.get(parts.next()?.parse::<usize>().ok()?)?;
                if parts.peek().is_none() {
                    return Some(hevo_runtime::suite::line_of(text, entry.span()?.start));
                }
                entry
            }
            _ => item.as_table_like()?,
        };
    }
    None
}

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
    fn finds_the_line_of_a_key_of_an_array_of_tables_entry() {
        let text = "[[model.backends]]\nname = \"a\"\n\n[[model.backends]]\nname = \"b\"\n\
                    api_key_env = \"K\"\n";
        assert_eq!(key_line(text, "model.backends.1.api_key_env"), Some(6));
        assert_eq!(key_line(text, "model.backends.0.name"), Some(2));
        assert_eq!(key_line(text, "model.backends.1"), Some(4));
        assert_eq!(key_line(text, "model.backends.2.name"), None);
    }

    #[test]
    fn finds_the_line_of_a_dotted_key() {
        assert_eq!(key_line(TEXT, "seed"), Some(1));
        assert_eq!(key_line(TEXT, "search.iterations"), Some(4));
        assert_eq!(key_line(TEXT, "budget.max_evaluations"), Some(7));
        assert_eq!(key_line(TEXT, "budget.max_usd"), None);
        assert_eq!(key_line(TEXT, "nope.iterations"), None);
    }

    #[test]
    fn finds_the_key_holding_an_offset() {
        let at = TEXT.find("\"x\"").unwrap() + 1;
        assert_eq!(key_at(TEXT, at).as_deref(), Some("search.iterations"));
        let at = TEXT.find("kind = 3").unwrap() + 7;
        assert_eq!(key_at(TEXT, at).as_deref(), Some("model.backends.kind"));
        assert_eq!(key_at(TEXT, 0), None);
    }
}
