//! Text the harness does not write itself (a failing test's last line, a bench's output,
//! a detail, a warning naming a bench, an id or a model name read from a run folder),
//! made safe for where it is shown: a terminal, where control characters are obeyed (ESC
//! starts a sequence that can clear the screen or retitle the window, CR returns to the
//! start of the line so what follows overwrites it), and markdown that GitHub renders
//! (where a line can start a heading, a link, HTML, or break a table row).
//!
//! Both functions show the text, never let it act: control characters are written as
//! visible escapes (`\x1b`, `\r`, `\u{9b}`), never passed through.

use std::fmt::Write;

/// Whether `c` acts on a terminal or on the layout of text instead of being shown: C0
/// controls (ESC, CR, BEL, backspace, newline, tab...), DEL, C1 controls (0x80-0x9f; 0x9b
/// is a one-byte CSI on some terminals), the line and paragraph separators, and the
/// invisible format characters that reorder or hide text (bidirectional overrides and
/// isolates, zero-width characters, the byte-order mark).
fn acts(c: char) -> bool {
    c.is_control()
        || matches!(
            c as u32,
            0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x2064 | 0x2066..=0x2069 | 0xFEFF
        )
}

/// A character that [`acts`], written as a visible escape.
fn visible(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// One line for a terminal: every control character (newline and tab included) shown as
/// an escape, so the text stays on its line and cannot move the cursor, clear the screen,
/// overwrite what was printed before it or start a fake line of its own.
pub fn for_terminal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if acts(c) {
            visible(c, &mut out);
        } else {
            out.push(c);
        }
    }
    out
}

/// A block of lines for a terminal, as the harness composed it: its newlines (and tabs)
/// kept, every other control character shown as an escape. For whole texts the harness
/// built whose one-line fields went through [`for_terminal`] already (a table, an error
/// chain), as a second guard.
pub fn for_terminal_block(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if acts(c) && c != '\n' && c != '\t' {
            visible(c, &mut out);
        } else {
            out.push(c);
        }
    }
    out
}

/// Text for markdown, inline or in a table cell: one line (every run of line breaks and
/// tabs becomes one space, ends trimmed), other control characters shown as escapes, and
/// what markdown or GitHub's renderer would act on escaped, so it reads as the text it is:
/// backslash escapes for `` \ ` * [ ] | ~ $ `` everywhere (`|` would end a table cell, `[`
/// start a link or an image, `$` math on GitHub), for `_` unless it stands between two
/// letters or digits (where it cannot emphasise: ids keep their look), and for what acts
/// only at the start of a line (`#`, `-`, `+`, `=`, the `.` or `)` of a leading number);
/// entities for `<`, `>` and `&` (HTML, autolinks, quotes, entities).
pub fn for_markdown(s: &str) -> String {
    let mut line = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.chars() {
        if matches!(
            c,
            '\n' | '\r' | '\t' | '\u{0b}' | '\u{0c}' | '\u{2028}' | '\u{2029}'
        ) {
            pending_space = true;
            continue;
        }
        if pending_space {
            line.push(' ');
            pending_space = false;
        }
        if acts(c) {
            visible(c, &mut line);
        } else {
            line.push(c);
        }
    }
    let chars: Vec<char> = line.trim().chars().collect();
    let leading_digits = chars.iter().take_while(|c| c.is_ascii_digit()).count();
    let alnum = |i: Option<usize>| {
        i.and_then(|i| chars.get(i))
            .is_some_and(char::is_ascii_alphanumeric)
    };
    let mut out = String::with_capacity(chars.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        let escape = match c {
            '<' => {
                out.push_str("&lt;");
                continue;
            }
            '>' => {
                out.push_str("&gt;");
                continue;
            }
            '&' => {
                out.push_str("&amp;");
                continue;
            }
            '\\' | '`' | '*' | '[' | ']' | '|' | '~' | '$' => true,
            '_' => !(alnum(i.checked_sub(1)) && alnum(Some(i + 1))),
            '#' | '-' | '+' | '=' => i == 0,
            '.' | ')' => leading_digits > 0 && i == leading_digits,
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One part of a natural sort key: a run of digits compares as a number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum NaturalPart {
    Text(String),
    /// The digits without leading zeros, compared by length first (so by value).
    Number(usize, String),
}

/// GSO's `natural_sort_key`: the text split at runs of digits, each run compared as a
/// number, so `run_10` sorts after `run_9`.
pub fn natural_key(s: &str) -> Vec<NaturalPart> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            if !text.is_empty() || out.is_empty() {
                out.push(NaturalPart::Text(std::mem::take(&mut text)));
            }
            digits.push(c);
        } else {
            if !digits.is_empty() {
                let n = digits.trim_start_matches('0').to_string();
                out.push(NaturalPart::Number(n.len(), n));
                digits.clear();
            }
            text.push(c);
        }
    }
    if !digits.is_empty() {
        let n = digits.trim_start_matches('0').to_string();
        out.push(NaturalPart::Number(n.len(), n));
    }
    out.push(NaturalPart::Text(text));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "\u{1b}[2J\rPASSED | x\n# heading";

    #[test]
    fn a_terminal_line_shows_every_control_character() {
        assert_eq!(for_terminal(HOSTILE), "\\x1b[2J\\rPASSED | x\\n# heading");
        assert_eq!(
            for_terminal("bell\u{7} bs\u{8} del\u{7f} tab\t nul\u{0}"),
            "bell\\x07 bs\\x08 del\\x7f tab\\t nul\\x00"
        );
        // C1 controls (0x9b is a one-byte CSI), bidi overrides, zero-width characters.
        assert_eq!(
            for_terminal("a\u{9b}2Jb\u{85}c\u{202e}d\u{200b}e\u{2028}"),
            "a\\u{9b}2Jb\\u{85}c\\u{202e}d\\u{200b}e\\u{2028}"
        );
        // Ordinary text, accents and symbols included, is left alone.
        assert_eq!(for_terminal("é ✓ 1.5x [0.9, 1.1]"), "é ✓ 1.5x [0.9, 1.1]");
        assert!(!for_terminal(HOSTILE).chars().any(acts));
    }

    #[test]
    fn a_terminal_block_keeps_its_lines_only() {
        assert_eq!(
            for_terminal_block("line 1\n\tline 2\r\u{1b}]0;title\u{7}\n"),
            "line 1\n\tline 2\\r\\x1b]0;title\\x07\n"
        );
    }

    #[test]
    fn markdown_is_one_line_with_nothing_to_render() {
        let md = for_markdown(HOSTILE);
        // CR is a line break to markdown: it collapses like a newline.
        assert_eq!(md, "\\\\x1b\\[2J PASSED \\| x # heading");
        assert!(!md.contains('\n') && !md.contains('\r') && !md.contains('\u{1b}'));
        // Every `|` is escaped: a table row keeps its cells.
        assert!(!md.replace("\\|", "").contains('|'));
        assert_eq!(
            for_markdown("<img src=x onerror=alert(1)> & [a](http://x) `c` *b* _i_ ~s~ $x$"),
            "&lt;img src=x onerror=alert(1)&gt; &amp; \\[a\\](http://x) \\`c\\` \\*b\\* \\_i\\_ \\~s\\~ \\$x\\$"
        );
        // What acts at the start of a line is escaped there (a list, a heading).
        assert_eq!(
            for_markdown("  - item\r\n\r\n+ two\n1. three  "),
            "\\- item + two 1. three"
        );
        assert_eq!(for_markdown("# title"), "\\# title");
        assert_eq!(for_markdown("12. ordered"), "12\\. ordered");
        assert_eq!(for_markdown("3) ordered"), "3\\) ordered");
        assert_eq!(for_markdown("> quote"), "&gt; quote");
        // Ids and ordinary text keep their look.
        assert_eq!(
            for_markdown("ci-model dedupe_list 1.5x"),
            "ci-model dedupe_list 1.5x"
        );
        assert_eq!(for_markdown("numpy__numpy _x"), "numpy\\_\\_numpy \\_x");
        assert_eq!(for_markdown("a\u{0}b\u{9b}"), "a\\\\x00b\\\\u{9b}");
    }

    #[test]
    fn natural_order_is_gsos() {
        let mut files = vec![
            "m-run_10.jsonl",
            "m-run_9.jsonl",
            "m-run_1.jsonl",
            "m-run_2.jsonl",
        ];
        files.sort_by_key(|f| natural_key(f));
        assert_eq!(
            files,
            [
                "m-run_1.jsonl",
                "m-run_2.jsonl",
                "m-run_9.jsonl",
                "m-run_10.jsonl"
            ]
        );
        assert!(natural_key("a2") < natural_key("a10"));
        assert!(natural_key("7") < natural_key("a"));
    }
}
