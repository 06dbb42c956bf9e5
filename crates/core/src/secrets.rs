//! Secret values (an agent's keys, a task's `[env] pass` variables): redacted from every log
//! in every form the harness recognises, and refused in a patch.
//!
//! Not only whole forms: any piece of a form at least [`PIECE`] characters long (twice that
//! for a hex form, whose characters carry half a byte each) is recognised, as written and in
//! the text read with everything but ASCII letters and digits left out. So a key printed in
//! two halves on two lines, cut by other output, or one character a line behind an indent,
//! does not survive. What does: pieces shorter than [`PIECE`] with letters or digits between
//! them (an agent bent on it can always encode its key; the harness catches encodings and
//! pieces, not intent). A secret shorter than a piece is recognised whole only.

use std::collections::HashSet;
use std::ops::Range;

/// The shortest piece of a secret's form recognised on its own: 8 characters. A piece of 8
/// characters of a random key turns up by chance in a log once in about 10^14 positions per
/// piece (62^8); at 6 (the shortest whole form) a 4 MB log of hex would give a false match
/// now and then, and pieces of 8 still catch a key of 16 or more characters split in two.
pub const PIECE: usize = 8;

/// Whole forms shorter than this are left out (they would match by chance).
const MIN_FORM: usize = 6;

/// The forms of a secret value that are replaced in logs and refused in patches: the value,
/// its base64 (standard and URL-safe, at each of the three alignments it can take inside a
/// longer encoded text: only the characters that depend on the value alone), its hex, its
/// URL encoding and its reverse. Forms shorter than 6 characters are left out (they would
/// match by chance).
pub fn secret_forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut forms = vec![value.to_string()];
    for alphabet in [BASE64_STD, BASE64_URL] {
        for k in 0..3usize {
            let mut padded = vec![0u8; k];
            padded.extend_from_slice(bytes);
            let enc = base64(&padded, alphabet);
            let from = (4 * k).div_ceil(3);
            let to = (8 * (k + bytes.len())) / 6;
            if to > from {
                forms.push(enc[from..to].to_string());
            }
        }
    }
    forms.push(hex::encode(bytes));
    forms.push(hex::encode_upper(bytes));
    forms.push(
        bytes
            .iter()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(b) {
                    (*b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect(),
    );
    forms.push(value.chars().rev().collect());
    let mut out: Vec<String> = Vec::new();
    for f in forms {
        if f.len() >= MIN_FORM && !out.contains(&f) {
            out.push(f);
        }
    }
    // Longest first: a form inside another is replaced after it.
    out.sort_by_key(|f| std::cmp::Reverse(f.len()));
    out
}

const BASE64_STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 without padding.
fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let mut acc = 0u32;
        for (i, &b) in chunk.iter().enumerate() {
            acc |= (b as u32) << (16 - 8 * i);
        }
        for i in 0..=chunk.len() {
            out.push(alphabet[((acc >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// `text` with every `%XX` escape decoded (bytes that do not make UTF-8 are replaced).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(h) = text.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(h, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What is looked for of one secret value.
struct Patterns {
    /// Whole forms (and the value itself, however short).
    whole: Vec<String>,
    /// Pieces of the forms, by length.
    pieces: Vec<(usize, HashSet<Vec<u8>>)>,
    /// Pieces of the forms' ASCII letters and digits, by length.
    squeezed: Vec<(usize, HashSet<Vec<u8>>)>,
}

impl Patterns {
    fn of(value: &str) -> Patterns {
        let hex = [hex::encode(value), hex::encode_upper(value)];
        let mut whole = secret_forms(value);
        whole.push(value.to_string());
        let mut pieces: Vec<(usize, HashSet<Vec<u8>>)> = Vec::new();
        let mut squeezed: Vec<(usize, HashSet<Vec<u8>>)> = Vec::new();
        let add = |sets: &mut Vec<(usize, HashSet<Vec<u8>>)>, bytes: &[u8], n: usize| {
            if bytes.len() < n {
                return;
            }
            let at = match sets.iter().position(|(len, _)| *len == n) {
                Some(i) => i,
                None => {
                    sets.push((n, HashSet::new()));
                    sets.len() - 1
                }
            };
            sets[at].1.extend(bytes.windows(n).map(<[u8]>::to_vec));
        };
        for form in &whole {
            let n = if hex.contains(form) { 2 * PIECE } else { PIECE };
            add(&mut pieces, form.as_bytes(), n);
            let alnum: Vec<u8> = form.bytes().filter(u8::is_ascii_alphanumeric).collect();
            add(&mut squeezed, &alnum, n);
        }
        Patterns {
            whole,
            pieces,
            squeezed,
        }
    }

    /// The byte ranges of `text` that hold the secret (overlapping, in no order).
    fn spans(&self, text: &str) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        for w in &self.whole {
            out.extend(text.match_indices(w.as_str()).map(|(i, m)| i..i + m.len()));
        }
        for (n, set) in &self.pieces {
            for_matches(text.as_bytes(), *n, set, |i| out.push(i..i + n));
        }
        // The text's ASCII letters and digits, each with its offset in the text.
        let (alnum, at): (Vec<u8>, Vec<usize>) = text
            .bytes()
            .enumerate()
            .filter(|(_, b)| b.is_ascii_alphanumeric())
            .map(|(i, b)| (b, i))
            .unzip();
        for (n, set) in &self.squeezed {
            for_matches(&alnum, *n, set, |i| out.push(at[i]..at[i + n - 1] + 1));
        }
        out
    }
}

/// Calls `found` with the start of every window of `n` bytes of `hay` that is in `set`.
fn for_matches(hay: &[u8], n: usize, set: &HashSet<Vec<u8>>, mut found: impl FnMut(usize)) {
    if n == 0 || hay.len() < n || set.is_empty() {
        return;
    }
    let mut first = [false; 256];
    for p in set {
        first[p[0] as usize] = true;
    }
    for i in 0..=hay.len() - n {
        if first[hay[i] as usize] && set.contains(&hay[i..i + n]) {
            found(i);
        }
    }
}

/// `spans` merged (overlapping or touching ones made one) and widened to whole characters.
fn merged(text: &str, mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<Range<usize>> = Vec::new();
    for mut r in spans {
        while r.start > 0 && !text.is_char_boundary(r.start) {
            r.start -= 1;
        }
        while r.end < text.len() && !text.is_char_boundary(r.end) {
            r.end += 1;
        }
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// `text` with git's C-style quoting of names undone: `\NNN` (octal) and `\t`, `\n`, `\"`,
/// `\\`... read as the bytes they stand for (bytes that do not make UTF-8 are replaced).
fn c_unquoted(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            let octal = bytes
                .get(i + 1..i + 4)
                .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
            if let Some(d) = octal {
                let v = d.iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
                out.push((v & 0xff) as u8);
                i += 4;
                continue;
            }
            let escaped = match bytes[i + 1] {
                b'a' => Some(7),
                b'b' => Some(8),
                b't' => Some(b'\t'),
                b'n' => Some(b'\n'),
                b'v' => Some(11),
                b'f' => Some(12),
                b'r' => Some(b'\r'),
                b'"' => Some(b'"'),
                b'\\' => Some(b'\\'),
                _ => None,
            };
            if let Some(b) = escaped {
                out.push(b);
                i += 2;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with every form of every secret value, and every piece of one (see [`PIECE`]),
/// replaced by `***`.
pub fn redact(text: &str, secrets: &[(String, String)]) -> String {
    let mut spans = Vec::new();
    for (_, v) in secrets {
        if !v.is_empty() {
            spans.extend(Patterns::of(v).spans(text));
        }
    }
    if spans.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for r in merged(text, spans) {
        out.push_str(&text[from..r.start]);
        out.push_str("***");
        from = r.end;
    }
    out.push_str(&text[from..]);
    out
}

/// The name of the first secret `patch` holds: a form of `secret_forms` or a piece of one
/// (see [`PIECE`]), as written, URL-decoded, with git's quoting of file names undone (a name
/// with control characters is written `"a\001b"`), or split into pieces by characters that
/// are not letters or digits (quotes, `+`, spaces, line breaks and the diff's own markers).
pub fn secret_in<'a>(patch: &str, secrets: &'a [(String, String)]) -> Option<&'a str> {
    let texts = [patch.to_string(), percent_decoded(patch), c_unquoted(patch)];
    secrets.iter().find_map(|(name, v)| {
        if v.is_empty() {
            return None;
        }
        let p = Patterns::of(v);
        let found = texts.iter().any(|t| !p.spans(t).is_empty());
        found.then_some(name.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_missing_ones_named() {
        let s = vec![("K".to_string(), "s3cr3t".to_string())];
        assert_eq!(redact("key=s3cr3t; again s3cr3t", &s), "key=***; again ***");
        // Encoded forms, at any alignment inside a longer encoded text.
        let key = "sk-ant-0123456789abcdef";
        let s = vec![("KEY".to_string(), key.to_string())];
        let b64 = |t: &str| base64(t.as_bytes(), BASE64_STD);
        for text in [
            b64(key),
            b64(&format!("x{key}")),
            b64(&format!("xy{key}yy")),
            base64(format!("zz{key}").as_bytes(), BASE64_URL),
            hex::encode(key),
            key.chars().rev().collect::<String>(),
        ] {
            let line = format!("token: {text} end");
            assert!(!redact(&line, &s).contains(&text), "{line}");
            assert_eq!(secret_in(&line, &s), Some("KEY"), "{line}");
        }
        // URL-encoded, its reserved characters (and even unreserved ones) escaped.
        let slashed = vec![("K".to_string(), "ab/cd+ef/gh".to_string())];
        assert_eq!(redact("q=ab%2Fcd%2Bef%2Fgh", &slashed), "q=***");
        assert_eq!(
            secret_in("+x = 'sk%2Dant%2D0123456789abcdef'\n", &s),
            Some("KEY")
        );
        // Split across a string concatenation and lines of a patch.
        let split = "+KEY = \"sk-ant-0123\" +\n+    \"456789abcdef\"\n";
        assert_eq!(secret_in(split, &s), Some("KEY"));
        assert_eq!(secret_in("+nothing to see here\n", &s), None);
        // base64 of "hello" cut at the value's own bytes, as Python would encode it.
        assert_eq!(base64(b"hello", BASE64_STD), "aGVsbG8");
    }

    /// Issue 28: a key printed in halves on two lines, with a prefix on each, or in pieces of
    /// four characters one a line, indented, or cut by other output, leaves no piece of 8.
    #[test]
    fn pieces_of_a_secret_are_redacted_across_lines() {
        let key = "test-secret-7f3a9c1e";
        let s = vec![("KEY".to_string(), key.to_string())];
        let halves = "first half: test-secre\nsecond half: t-7f3a9c1e\n";
        let out = redact(halves, &s);
        assert_eq!(out, "first half: ***\nsecond half: ***\n");
        let folded = "start\n    | test\n    | -sec\n    | ret-\n    | 7f3a\n    | 9c1e\nend\n";
        let out = redact(folded, &s);
        assert!(
            out.starts_with("start\n") && out.ends_with("\nend\n"),
            "{out}"
        );
        let squeezed: String = out.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        assert_eq!(squeezed, "startend", "{out}");
        // Cut by another process's output, each part of 8 or more.
        let cut = "key test-secr[other: 12 lines]et-7f3a9c1e\n";
        assert_eq!(redact(cut, &s), "key ***[other: 12 lines]***\n");
        // Pieces of the encoded forms too: half a base64 and half a hex, on lines of their own.
        let b64 = base64(key.as_bytes(), BASE64_STD);
        let hex = hex::encode(key);
        let text = format!("a {}\nb {}\nc {}\n", &b64[..12], &hex[..20], &hex[20..]);
        assert_eq!(redact(&text, &s), "a ***\nb ***\nc ***\n", "{text}");
        // A patch holding the halves on two lines is refused.
        let patch = "+A = 'test-secre'\n+B = 'zz' + 't-7f3a9c1e'\n";
        assert_eq!(secret_in(patch, &s), Some("KEY"));
        // Text that shares less than a piece is left alone.
        let near = "test-se is 7f3a9c1 and a9c1e- short\n";
        assert_eq!(redact(near, &s), near);
        assert_eq!(secret_in(near, &s), None);
    }

    /// Secrets shorter than a piece: only whole forms are recognised (a piece of a short
    /// secret would match by chance), and a UTF-8 secret is cut at character boundaries.
    #[test]
    fn short_and_non_ascii_secrets() {
        let s = vec![("K".to_string(), "abc123x".to_string())];
        assert_eq!(redact("abc123 abc123x", &s), "abc123 ***");
        let s = vec![("K".to_string(), "clé-très-secrète-42".to_string())];
        let out = redact("v=clé-très-secrète-42 and très-secrète", &s);
        assert_eq!(out, "v=*** and ***");
    }

    /// git writes a file name with control characters C-quoted (`\001`, `\t`): a key with
    /// one between each character, named as a file, is read back from git's quoting.
    #[test]
    fn a_key_in_a_file_name_quoted_by_git_is_refused() {
        let key = "test-secret-7f3a9c1e";
        let s = vec![("KEY".to_string(), key.to_string())];
        let name: String = key.chars().map(|c| format!("{c}\\001")).collect();
        let patch = format!(
            "diff --git \"a/{name}\" \"b/{name}\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/{name}\"\n@@ -0,0 +1 @@\n+x\n"
        );
        assert_eq!(secret_in(&patch, &s), Some("KEY"), "{patch}");
        let tabbed: String = key.chars().map(|c| format!("{c}\\t")).collect();
        assert_eq!(secret_in(&format!("+++ \"b/{tabbed}\"\n"), &s), Some("KEY"));
    }
}
