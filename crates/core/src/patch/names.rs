//! How git apply and GNU patch read a file name out of a header line.
//!
//! Each function returns every reading a tool could make of one header line: as written
//! (git with a guessed `-p0`), with one leading component stripped the git way (up to the
//! first `/`) and the GNU way (through the first run of slashes). Callers check them all.

use std::sync::LazyLock;

use regex::Regex;

/// C `isspace` in the C locale: what both tools call white space.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn trim_start_c(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii() && is_c_space(c as u8))
}

fn trim_end_c(s: &str) -> &str {
    s.trim_end_matches(|c: char| c.is_ascii() && is_c_space(c as u8))
}

/// Decodes a C-quoted name (`"a/sp\303\251 ce"`) starting at `s`: the name and what follows
/// the closing quote. `None` when it is not a well-formed quoted string.
pub fn unquote_c(s: &str) -> Option<(String, &str)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return Some((String::from_utf8_lossy(&out).into_owned(), &s[i + 1..])),
            b'\\' => {
                i += 1;
                let e = *b.get(i)?;
                match e {
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'v' => out.push(11),
                    b'\\' | b'"' => out.push(e),
                    b'0'..=b'7' => {
                        let mut v = u32::from(e - b'0');
                        for _ in 0..2 {
                            match b.get(i + 1) {
                                Some(&d @ b'0'..=b'7') => {
                                    v = v * 8 + u32::from(d - b'0');
                                    i += 1;
                                }
                                _ => break,
                            }
                        }
                        out.push((v & 0xff) as u8);
                    }
                    _ => return None,
                }
            }
            _ => out.push(c),
        }
        i += 1;
    }
    None
}

/// git's `-p1` on a `---`/`+++` name: everything after the first `/` (a leading `/` counts).
fn git_strip1(v: &str) -> Option<&str> {
    let i = v.find('/')?;
    let rest = &v[i + 1..];
    (!rest.is_empty()).then_some(rest)
}

/// GNU patch's `-p1`: everything after the first run of slashes; no slash, no name.
fn gnu_strip1(v: &str) -> Option<&str> {
    let i = v.find('/')?;
    let rest = v[i..].trim_start_matches('/');
    (!rest.is_empty()).then_some(rest)
}

/// git's `-p1` on a `diff --git` name: a leading `/` makes the name unusable.
fn skip_tree_prefix(s: &str, p: usize) -> Option<&str> {
    if p == 0 {
        return (!s.starts_with('/')).then_some(s);
    }
    match s.find('/') {
        Some(0) | None => None,
        Some(i) => Some(&s[i + 1..]),
    }
}

/// Adds `v` as written and stripped both ways, with and without trailing white space.
fn push_readings(out: &mut Vec<String>, v: &str) {
    for v in [v, trim_end_c(v)] {
        if v.is_empty() || v == "/dev/null" {
            continue;
        }
        for r in [Some(v), git_strip1(v), gnu_strip1(v)]
            .into_iter()
            .flatten()
        {
            if !out.iter().any(|o| o == r) {
                out.push(r.to_string());
            }
        }
    }
}

/// git's `is_dev_null`: the line starts with `/dev/null` and white space or its end.
pub fn is_dev_null(rest: &str) -> bool {
    rest.strip_prefix("/dev/null")
        .is_some_and(|r| r.bytes().next().is_none_or(is_c_space))
}

/// GNU `fetchname`: a name may hold spaces only when a tab (a newline for `Index:`) follows
/// the space run later on the line.
fn gnu_cut(s: &str, stamp: bool) -> &str {
    let b = s.as_bytes();
    let n = b.len();
    // The line as GNU patch holds it: the text, then "\n", then NUL.
    let at = |i: usize| -> u8 {
        match i.cmp(&n) {
            std::cmp::Ordering::Less => b[i],
            std::cmp::Ordering::Equal => b'\n',
            std::cmp::Ordering::Greater => 0,
        }
    };
    let want = if stamp { b'\t' } else { b'\n' };
    let mut t = 0;
    while t < n {
        if is_c_space(b[t]) {
            let mut u = t;
            while at(u) != b'\t' && is_c_space(at(u + 1)) {
                u += 1;
            }
            if at(u) != b'\t' && (u + 1..=n).any(|i| at(i) == want) {
                t += 1;
                continue;
            }
            break;
        }
        t += 1;
    }
    &s[..t]
}

/// git `find_name(..., TERM_TAB)`: the name ends at a tab or any white space but a space.
fn git_tab_cut(s: &str) -> &str {
    let end = s
        .bytes()
        .position(|c| is_c_space(c) && c != b' ')
        .unwrap_or(s.len());
    &s[..end]
}

/// git `find_name_traditional`: a trailing `diff -u` timestamp is cut off.
fn git_date_cut(s: &str) -> Option<&str> {
    static DATE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(
            r"(?:\t| +)[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?: ?[+-][0-9]{2}:?[0-9]{2})? *$",
        )
        .ok()
    });
    let m = DATE.as_ref()?.find(s)?;
    Some(&s[..m.start()])
}

/// Readings of the name after `--- `, `+++ ` or `*** ` (`stamp`), or after `Index:`.
pub fn header_readings(rest: &str, stamp: bool) -> Vec<String> {
    let mut out = Vec::new();
    let t = trim_start_c(rest);
    if let Some((name, _)) = unquote_c(t) {
        push_readings(&mut out, &name);
    }
    // git reads the line itself; a quoted name it cannot decode is taken literally.
    if stamp {
        for s in [rest, t] {
            if is_dev_null(s) {
                continue;
            }
            push_readings(&mut out, git_tab_cut(s));
            if let Some(d) = git_date_cut(s) {
                push_readings(&mut out, d);
            }
        }
    }
    if !t.starts_with('"') {
        push_readings(&mut out, gnu_cut(t, stamp));
    }
    out
}

/// What git's `find_name`, TERM_TAB, `-p1` makes of a `---`/`+++` name, for display.
pub fn git_name(rest: &str) -> Option<String> {
    if is_dev_null(rest) {
        return None;
    }
    let t = trim_start_c(rest);
    let name = match unquote_c(t) {
        Some((n, _)) => n,
        None => git_tab_cut(rest).to_string(),
    };
    Some(display(&name))
}

/// The name GNU patch takes from a header line, `-p1`; `None` for `/dev/null` or a name
/// with no slash to strip.
pub fn gnu_name(rest: &str, stamp: bool) -> Option<String> {
    let t = trim_start_c(rest);
    let name = match unquote_c(t) {
        Some((n, _)) => n,
        None if t.starts_with('"') => return None,
        None => gnu_cut(t, stamp).to_string(),
    };
    if name == "/dev/null" {
        return None;
    }
    gnu_strip1(&name).map(squash)
}

/// Strips one component when there is one: git's `-p1`, or its guessed `-p0` otherwise.
pub fn display(name: &str) -> String {
    squash(git_strip1(name).unwrap_or(name))
}

/// Collapses runs of slashes, as git's `squash_slash` does.
pub fn squash(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    out
}

/// The name as written after `rename from ` and friends, which git takes whole.
pub fn rename_name(rest: &str) -> String {
    match unquote_c(rest) {
        Some((n, _)) => n,
        None => {
            let end = rest
                .bytes()
                .position(|c| is_c_space(c) && c != b' ' && c != b'\t')
                .unwrap_or(rest.len());
            rest[..end].to_string()
        }
    }
}

/// Readings of `rename from/to`, `copy from/to`: as written only, quoted or literal.
pub fn rename_readings(rest: &str) -> Vec<String> {
    let mut out = Vec::new();
    for v in [rename_name(rest), rest.to_string()] {
        for v in [v.as_str(), trim_end_c(&v)] {
            if !v.is_empty() && !out.iter().any(|o| o == v) {
                out.push(v.to_string());
            }
        }
    }
    out
}

/// GNU `parse_name`: one token, quoted or up to white space; and what follows it.
fn gnu_token(s: &str) -> (String, &str) {
    let s = trim_start_c(s);
    if let Some((name, rest)) = unquote_c(s) {
        return (name, rest);
    }
    let end = s.bytes().position(is_c_space).unwrap_or(s.len());
    (s[..end].to_string(), &s[end..])
}

/// The two names of a `diff --git` line as GNU patch splits them, as written.
pub fn git_header_tokens(rest: &str) -> (String, String) {
    let (a, after) = gnu_token(rest);
    let (b, _) = gnu_token(after);
    (a, b)
}

/// Readings of a `diff --git` line: git's own (`-p1` and `-p0`) and GNU's two tokens.
pub fn git_header_readings(rest: &str) -> Vec<String> {
    let mut out = Vec::new();
    for p in [1, 0] {
        if let Some(n) = git_header_name(rest, p) {
            push_readings_exact(&mut out, &n);
        }
    }
    let (a, b) = git_header_tokens(rest);
    push_readings(&mut out, &a);
    push_readings(&mut out, &b);
    out
}

fn push_readings_exact(out: &mut Vec<String>, v: &str) {
    if !v.is_empty() && !out.iter().any(|o| o == v) {
        out.push(v.to_string());
    }
}

/// git's `git_header_name`: the name that shows up on both sides of `diff --git A B` once
/// `p` components are stripped; `None` when the sides differ (a rename) or are malformed.
pub fn git_header_name(rest: &str, p: usize) -> Option<String> {
    if rest.starts_with('"') {
        let (first, after) = unquote_c(rest)?;
        let first = skip_tree_prefix(&first, p)?.to_string();
        let second = trim_start_c(after);
        if second.is_empty() {
            return None;
        }
        let sec = match unquote_c(second) {
            Some((s, _)) => s,
            None if second.starts_with('"') => return None,
            None => second.to_string(),
        };
        let sec = skip_tree_prefix(&sec, p)?;
        return (sec == first).then_some(first);
    }
    let name = skip_tree_prefix(rest, p)?;
    if let Some(q) = name.find('"') {
        let (sp, _) = unquote_c(&name[q..])?;
        let np = skip_tree_prefix(&sp, p)?;
        let len = np.len();
        let nb = name.as_bytes();
        if len < q && nb[..len] == *np.as_bytes() && is_c_space(nb[len]) {
            return Some(np.to_string());
        }
        return None;
    }
    for (len, c) in name.bytes().enumerate() {
        if c != b' ' && c != b'\t' {
            continue;
        }
        if len + 1 >= name.len() {
            return None;
        }
        if let Some(second) = skip_tree_prefix(&name[len + 1..], p)
            && second == &name[..len]
        {
            return Some(second.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquotes_c_strings() {
        assert_eq!(
            unquote_c(r#""a/sp ace.py" rest"#),
            Some(("a/sp ace.py".into(), " rest"))
        );
        assert_eq!(
            unquote_c(r#""\142ench.py""#).map(|x| x.0),
            Some("bench.py".into())
        );
        assert_eq!(
            unquote_c(r#""a\tb\"c""#).map(|x| x.0),
            Some("a\tb\"c".into())
        );
        assert_eq!(unquote_c(r#""a/bench.py"#), None);
        assert_eq!(unquote_c(r#""a\qb""#), None);
    }

    #[test]
    fn git_header_names() {
        assert_eq!(git_header_name("a/x.py b/x.py", 1), Some("x.py".into()));
        assert_eq!(
            git_header_name("x/bench.py y/bench.py", 1),
            Some("bench.py".into())
        );
        assert_eq!(
            git_header_name("a/sp ace.py b/sp ace.py", 1),
            Some("sp ace.py".into())
        );
        assert_eq!(git_header_name("a/x.py b/y.py", 1), None);
        assert_eq!(git_header_name("a/x.py b/x.py", 0), None);
        assert_eq!(git_header_name("x.py x.py", 0), Some("x.py".into()));
        assert_eq!(
            git_header_name(r#""a/sp ace.py" "b/sp ace.py""#, 1),
            Some("sp ace.py".into())
        );
        assert_eq!(git_header_name(r#"a/q "b/q""#, 1), Some("q".into()));
    }

    #[test]
    fn header_name_cuts() {
        assert_eq!(gnu_cut("a/x y\t2024-01-01", true), "a/x y");
        assert_eq!(gnu_cut("a/x y", true), "a/x");
        assert_eq!(gnu_cut("a/x y  ", false), "a/x y");
        assert_eq!(git_tab_cut("a/x y\tdate"), "a/x y");
        assert_eq!(
            git_date_cut("a/x y 2024-01-01 10:00:00.000000000 +0000"),
            Some("a/x y")
        );
        let r = header_readings("a/x.py\t2024-01-01 10:00:00.000000000 +0000", true);
        assert!(r.contains(&"x.py".to_string()), "{r:?}");
        assert!(!r.iter().any(|x| x.contains('\t')), "{r:?}");
        assert!(header_readings("/dev/null\t1970-01-01 00:00:00 +0000", true).is_empty());
        assert!(header_readings("/dev/null", true).is_empty());
        let r = header_readings(r#""a/bench.py"#, true);
        assert!(r.contains(&"bench.py".to_string()), "{r:?}");
        let r = header_readings("a//bench.py", true);
        assert!(r.contains(&"bench.py".to_string()) && r.contains(&"/bench.py".to_string()));
    }
}
