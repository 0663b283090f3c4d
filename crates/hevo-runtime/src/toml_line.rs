//! The line of a key in a TOML file (`hevo.toml`, `harness.toml`), for errors found after
//! parsing: read with `toml_edit`, which keeps spans.

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
            return Some(crate::suite::line_of(text, at));
        }
        table = match item {
            Item::ArrayOfTables(array) => {
                let entry = array.get(parts.next()?.parse::<usize>().ok()?)?;
                if parts.peek().is_none() {
                    return Some(crate::suite::line_of(text, entry.span()?.start));
                }
                entry
            }
            _ => item.as_table_like()?,
        };
    }
    None
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
    fn finds_the_line_of_a_key_in_an_inline_table() {
        let text = "entry = [\"x\"]\n[params]\n\nt = { values = [1, 2], default = 3 }\n";
        assert_eq!(key_line(text, "params.t.default"), Some(4));
        assert_eq!(key_line(text, "params.t"), Some(4));
    }
}
