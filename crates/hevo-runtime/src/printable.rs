//! Untrusted text made safe to print on a terminal.
//!
//! A harness's stdout and stderr, an agent's transcript and a proposer's code reach the
//! user's terminal in causes, failure blocks, `hevo show` and error messages. Printed raw,
//! their control characters act on the terminal: `ESC [2J` clears it, a carriage return
//! lets a harness write `pass rate 100.0%` over hevo's own line, `ESC ]0;` sets the window
//! title, and the bidirectional overrides reorder what is shown. [`printable`] shows each
//! such character as an escape (`\u{1b}`) instead; line breaks and tabs stay. A field that
//! is one line of hevo's own output (a name, a parent, an axis) goes through [`one_line`],
//! which escapes line breaks and tabs too, so it cannot start a line that looks like
//! hevo's. The HTML report's escaping applies the same rule, since a browser too lets the
//! bidirectional overrides reorder a cell. `--json` needs none of this: JSON escapes
//! control characters itself.

use std::borrow::Cow;

/// `text` with every control character but `\n` and `\t` (C0, DEL, C1) and every
/// bidirectional formatting character shown as `\u{..}`; unchanged (borrowed) when it has
/// none.
pub fn printable(text: &str) -> Cow<'_, str> {
    escaped(text, is_unsafe)
}

/// `text` with each character `escape` picks shown as `\u{..}`.
fn escaped(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`printable`], with line breaks and tabs escaped as well: for untrusted text printed as
/// part of one line.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c.is_control() || is_unsafe(c))
}

/// Whether `c` acts on a terminal instead of being shown.
fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_act_on_no_terminal_and_plain_text_is_borrowed() {
        let attack = "ok\x1b[2J\x1b]0;pwned\x07\rpass rate 100.0%\x08\u{9b}1m\u{202e}txt\x7f";
        let shown = printable(attack);
        assert_eq!(
            shown,
            "ok\\u{1b}[2J\\u{1b}]0;pwned\\u{7}\\u{d}pass rate 100.0%\\u{8}\\u{9b}1m\\u{202e}txt\\u{7f}"
        );
        assert!(!shown.chars().any(is_unsafe));
        let plain = "line one\n\tindented, naïve, 日本語";
        assert!(matches!(printable(plain), Cow::Borrowed(p) if p == plain));
        assert_eq!(
            one_line("name\npick: evil 1.000\t\u{202e}"),
            "name\\u{a}pick: evil 1.000\\u{9}\\u{202e}"
        );
        assert!(matches!(one_line("naïve-2"), Cow::Borrowed("naïve-2")));
    }
}
