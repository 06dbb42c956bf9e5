//! Globs over '/'-separated repository paths (`protected` in task.toml), translated to
//! regular expressions in a syntax that Rust's `regex` and Python's `re` read the same way:
//! the host checks patches with them, the in-container guard (container/programs/guard.py) files.

/// A glob over '/'-separated repository paths, as a regex (`.gitignore`-like): a pattern
/// without a '/' matches a name at any depth (`test_*.py` protects `tests/test_a.py`), one
/// with a '/' is anchored at the repository root (a leading '/' only anchors); `*` and `?`
/// stay within one component, `**` crosses them, `[...]` and `{a,b}` as usual. A pattern
/// that matches a folder protects everything in it.
pub fn glob_to_regex(glob: &str) -> Result<String, String> {
    let trimmed = glob.trim();
    if trimmed.is_empty() {
        return Err("empty pattern".into());
    }
    let anchored = trimmed.trim_end_matches('/').contains('/');
    let body = trimmed.trim_start_matches('/').trim_end_matches('/');
    if body.is_empty() {
        return Err(format!("{glob:?} matches the whole repository"));
    }
    let mut re = String::from(if anchored { "^" } else { "^(?:.*/)?" });
    re.push_str(&translate(body)?);
    re.push_str("(?:/.*)?$");
    Ok(re)
}

const META: &str = ".+*?()|[]{}^$\\";

fn translate(body: &str) -> Result<String, String> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut in_braces = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                let at_start = i == 0 || chars[i - 1] == '/';
                let slash_after = chars.get(i + 2) == Some(&'/');
                if at_start && slash_after {
                    out.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    out.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => {
                let end = chars[i + 1..]
                    .iter()
                    .enumerate()
                    .skip(1)
                    .find(|(_, c)| **c == ']')
                    .map(|(j, _)| i + 1 + j)
                    .ok_or_else(|| format!("unclosed '[' in {body:?}"))?;
                out.push('[');
                for (k, &cc) in chars[i + 1..end].iter().enumerate() {
                    if k == 0 && (cc == '!' || cc == '^') {
                        out.push('^');
                    } else if cc == '-' || cc.is_alphanumeric() {
                        out.push(cc);
                    } else if cc == '/' {
                        return Err(format!("'/' inside [...] in {body:?}"));
                    } else {
                        out.push('\\');
                        out.push(cc);
                    }
                }
                out.push(']');
                i = end + 1;
                continue;
            }
            '{' => {
                in_braces += 1;
                out.push_str("(?:");
            }
            '}' if in_braces > 0 => {
                in_braces -= 1;
                out.push(')');
            }
            ',' if in_braces > 0 => out.push('|'),
            '\\' => {
                let next = chars
                    .get(i + 1)
                    .ok_or_else(|| format!("trailing '\\' in {body:?}"))?;
                push_literal(&mut out, *next);
                i += 2;
                continue;
            }
            c => push_literal(&mut out, c),
        }
        i += 1;
    }
    if in_braces > 0 {
        return Err(format!("unclosed '{{' in {body:?}"));
    }
    Ok(out)
}

fn push_literal(out: &mut String, c: char) {
    if META.contains(c) {
        out.push('\\');
    }
    out.push(c);
}

/// `path` as a regex that matches exactly it.
pub fn escape(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        push_literal(&mut out, c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    fn m(glob: &str, path: &str) -> bool {
        Regex::new(&glob_to_regex(glob).unwrap())
            .unwrap()
            .is_match(path)
    }

    #[test]
    fn globs_read_like_gitignore() {
        assert!(m("bench.py", "bench.py"));
        assert!(m("bench.py", "sub/bench.py"), "no '/': any depth");
        assert!(!m("bench.py", "xbench.py"));
        assert!(!m("bench.py", "bench.pyc"));
        assert!(m("test_*.py", "tests/test_a.py"));
        assert!(!m("test_*.py", "test_a/b.py"));
        assert!(!m("/test_*.py", "tests/test_a.py"), "leading '/' anchors");
        assert!(m("/test_*.py", "test_a.py"));
        assert!(m("tests/**", "tests/a/b/c.py"));
        assert!(
            m("tests", "tests/a/b/c.py"),
            "a folder protects its contents"
        );
        assert!(m("tests/", "tests/x.py"));
        assert!(
            m("tests/", "src/tests/x.py"),
            "a trailing / does not anchor"
        );
        assert!(m("**/fixtures/*.json", "a/b/fixtures/x.json"));
        assert!(m("**/fixtures/*.json", "fixtures/x.json"));
        assert!(!m("src/*.py", "src/a/b.py"), "'*' stays in one component");
        assert!(m("src/**/*.py", "src/a/b.py"));
        assert!(m("src/**/*.py", "src/b.py"));
        assert!(m("*.{pth,cfg}", "x/y.cfg"));
        assert!(m("data[0-9].txt", "data7.txt"));
        assert!(!m("data[!0-9].txt", "data7.txt"));
        assert!(
            m("a+b (1).py", "a+b (1).py"),
            "regex metacharacters are literal"
        );
        assert!(!m("a.py", "axpy"));
        assert!(glob_to_regex("").is_err());
        assert!(glob_to_regex("/").is_err());
        assert!(glob_to_regex("a[b").is_err());
        assert!(glob_to_regex("{a,b").is_err());
    }

    #[test]
    fn translated_regexes_mean_the_same_in_python() {
        // The guard in the container reads the same strings with Python's `re`.
        let Ok(out) = std::process::Command::new("python3")
            .arg("-c")
            .arg(
                "import json,re,sys\nfor p, path, want in json.load(sys.stdin):\n    got = re.match(p, path) is not None\n    assert got == want, (p, path, got)\nprint('ok')",
            )
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                let cases: Vec<(String, &str, bool)> = [
                    ("test_*.py", "tests/test_a.py"),
                    ("tests/**", "tests/a/b.py"),
                    ("*.{pth,cfg}", "x/y.cfg"),
                    ("data[!0-9].txt", "data7.txt"),
                    ("a+b (1).py", "a+b (1).py"),
                    ("src/*.py", "src/a/b.py"),
                    ("**/x", "x"),
                    ("conftest.py", "deep/er/conftest.py"),
                ]
                .iter()
                .map(|(g, p)| (glob_to_regex(g).unwrap(), *p, m(g, p)))
                .collect();
                if let Some(mut stdin) = child.stdin.take() {
                    stdin.write_all(serde_json::to_string(&cases).unwrap().as_bytes())?;
                }
                child.wait_with_output()
            })
        else {
            eprintln!("skipping: no python3 on the host");
            return;
        };
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "ok",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
