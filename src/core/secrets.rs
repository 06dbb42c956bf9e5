//! Secret values (an agent's keys, a task's `[env] pass` variables): redacted from every log
//! in every form the harness recognises, and refused in a patch.

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
        if f.len() >= 6 && !out.contains(&f) {
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

/// `text` with every form of every secret value replaced by `***`.
pub fn redact(text: &str, secrets: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (_, v) in secrets {
        if v.is_empty() {
            continue;
        }
        for form in secret_forms(v) {
            out = out.replace(&form, "***");
        }
        // A value too short for its encodings to be told from chance is still replaced.
        out = out.replace(v.as_str(), "***");
    }
    out
}

/// The name of the first secret `patch` holds, in any form of `secret_forms` or split into
/// pieces by characters that are not letters or digits (quotes, `+`, spaces, line breaks
/// and the diff's own markers), when its letters and digits are at least 8.
pub fn secret_in<'a>(patch: &str, secrets: &'a [(String, String)]) -> Option<&'a str> {
    let squeezed: String = patch.chars().filter(|c| c.is_alphanumeric()).collect();
    let unescaped = percent_decoded(patch);
    secrets.iter().find_map(|(name, v)| {
        let alnum: String = v.chars().filter(|c| c.is_alphanumeric()).collect();
        let found = [patch, unescaped.as_str()].iter().any(|text| {
            text.contains(v.as_str()) || secret_forms(v).iter().any(|f| text.contains(f.as_str()))
        }) || (alnum.len() >= 8 && squeezed.contains(&alnum));
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
}
