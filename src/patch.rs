//! Checks on a patch made on the host, before any container: empty, too large, paths that
//! escape the repository, protected paths.

use crate::task::Task;

/// Patches above this size are refused rather than copied into a container.
pub const MAX_PATCH_BYTES: usize = 20 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchCheck {
    /// Nothing to apply (empty, null or whitespace only).
    Empty,
    /// Not applied: the reason says why, naming the path.
    Rejected(String),
    /// May be applied; these are the repository paths it touches.
    Ok(Vec<String>),
}

pub fn check(patch: &str, task: &Task) -> PatchCheck {
    check_with(patch, |p| task.is_protected(p))
}

pub fn check_with(patch: &str, is_protected: impl Fn(&str) -> bool) -> PatchCheck {
    if patch.trim().is_empty() {
        return PatchCheck::Empty;
    }
    if patch.len() > MAX_PATCH_BYTES {
        return PatchCheck::Rejected(format!(
            "patch is {} bytes, above the limit of {MAX_PATCH_BYTES}",
            patch.len()
        ));
    }
    let paths = touched_paths(patch);
    for p in &paths {
        if p.starts_with('/') || p.split('/').any(|c| c == "..") {
            return PatchCheck::Rejected(format!("path {p:?} escapes the repository"));
        }
        if p == ".git" || p.starts_with(".git/") {
            return PatchCheck::Rejected(format!("path {p:?} is inside .git"));
        }
        if is_protected(p) {
            return PatchCheck::Rejected(format!("path {p:?} is protected by the task"));
        }
    }
    PatchCheck::Ok(paths)
}

/// Every repository path a unified or git diff names, old and new sides, without `a/`/`b/`.
pub fn touched_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |p: Option<String>| {
        if let Some(p) = p
            && !p.is_empty()
            && p != "/dev/null"
            && !out.contains(&p)
        {
            out.push(p);
        }
    };
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let (a, b) = split_git_header(rest);
            push(a.map(|a| strip_side(&a)));
            push(b.map(|b| strip_side(&b)));
        } else if let Some(rest) = line
            .strip_prefix("--- ")
            .or_else(|| line.strip_prefix("+++ "))
        {
            // "--- a/path\t2024-01-01 ..." : the timestamp after a tab is not part of the path.
            let raw = rest.split('\t').next().unwrap_or("").trim_end();
            push(Some(strip_side(&unquote(raw))));
        } else if let Some(rest) = line
            .strip_prefix("rename from ")
            .or_else(|| line.strip_prefix("rename to "))
            .or_else(|| line.strip_prefix("copy from "))
            .or_else(|| line.strip_prefix("copy to "))
        {
            push(Some(unquote(rest.trim_end())));
        }
    }
    out
}

fn strip_side(p: &str) -> String {
    if p == "/dev/null" {
        return p.to_string();
    }
    p.strip_prefix("a/")
        .or_else(|| p.strip_prefix("b/"))
        .unwrap_or(p)
        .to_string()
}

/// `a/x b/y`, or quoted forms `"a/x y" "b/x y"`.
fn split_git_header(rest: &str) -> (Option<String>, Option<String>) {
    let rest = rest.trim_end();
    if rest.starts_with('"') {
        let mut parts = Vec::new();
        let mut chars = rest.chars().peekable();
        while let Some(&c) = chars.peek() {
            if c == ' ' {
                chars.next();
                continue;
            }
            let mut token = String::new();
            if c == '"' {
                token.push(chars.next().unwrap_or('"'));
                let mut escaped = false;
                for c in chars.by_ref() {
                    token.push(c);
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        break;
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ' ' {
                        break;
                    }
                    token.push(c);
                    chars.next();
                }
            }
            parts.push(unquote(&token));
        }
        return (parts.first().cloned(), parts.get(1).cloned());
    }
    // Unquoted: paths may contain spaces; git writes "a/P b/P" with the same P when not renamed.
    if let Some(idx) = rest.find(" b/") {
        return (
            Some(rest[..idx].to_string()),
            Some(rest[idx + 1..].to_string()),
        );
    }
    let mut it = rest.splitn(2, ' ');
    (it.next().map(str::to_string), it.next().map(str::to_string))
}

/// Git's C-style quoting of unusual path names.
fn unquote(s: &str) -> String {
    let Some(inner) = s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return s.to_string();
    };
    let mut bytes = Vec::new();
    let mut it = inner.bytes().peekable();
    while let Some(b) = it.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match it.next() {
            Some(b'n') => bytes.push(b'\n'),
            Some(b't') => bytes.push(b'\t'),
            Some(d @ b'0'..=b'7') => {
                let mut v = u32::from(d - b'0');
                for _ in 0..2 {
                    if let Some(&n @ b'0'..=b'7') = it.peek() {
                        v = v * 8 + u32::from(n - b'0');
                        it.next();
                    }
                }
                bytes.push(v as u8);
            }
            Some(other) => bytes.push(other),
            None => {}
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A patch whose last line lacks "\n" gets one (git apply calls such a patch corrupt).
pub fn normalise(patch: &str) -> std::borrow::Cow<'_, str> {
    if patch.is_empty() || patch.ends_with('\n') {
        std::borrow::Cow::Borrowed(patch)
    } else {
        std::borrow::Cow::Owned(format!("{patch}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/mod.py b/mod.py\nindex 1..2 100644\n--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-a\n+b\n";

    fn prot(p: &str) -> bool {
        p == "bench.py" || p.starts_with("tests/")
    }

    #[test]
    fn paths_of_git_and_plain_diffs() {
        assert_eq!(touched_paths(DIFF), ["mod.py"]);
        let plain = "--- a/x/y.py\t2024-01-01\n+++ b/x/y.py\t2024-01-02\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(touched_paths(plain), ["x/y.py"]);
        let rename = "diff --git a/old.py b/new.py\nsimilarity index 90%\nrename from old.py\nrename to new.py\n";
        assert_eq!(touched_paths(rename), ["old.py", "new.py"]);
        let created = "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n";
        assert_eq!(touched_paths(created), ["n.py"]);
        let quoted = "diff --git \"a/sp ace.py\" \"b/sp ace.py\"\n--- \"a/sp ace.py\"\n+++ \"b/sp ace.py\"\n";
        assert_eq!(touched_paths(quoted), ["sp ace.py"]);
    }

    #[test]
    fn checks() {
        assert_eq!(check_with("", prot), PatchCheck::Empty);
        assert_eq!(check_with(" \n\t\n", prot), PatchCheck::Empty);
        assert_eq!(
            check_with(DIFF, prot),
            PatchCheck::Ok(vec!["mod.py".into()])
        );
        let bench = DIFF.replace("mod.py", "bench.py");
        assert!(
            matches!(check_with(&bench, prot), PatchCheck::Rejected(r) if r.contains("bench.py") && r.contains("protected"))
        );
        let escape = DIFF.replace("mod.py", "../etc/passwd");
        assert!(
            matches!(check_with(&escape, prot), PatchCheck::Rejected(r) if r.contains("escapes"))
        );
        let git = DIFF.replace("mod.py", ".git/config");
        assert!(matches!(check_with(&git, prot), PatchCheck::Rejected(r) if r.contains(".git")));
        // A renamed file that lands on a protected path is caught on either side.
        let rename = "diff --git a/m.py b/tests/m.py\nrename from m.py\nrename to tests/m.py\n";
        assert!(matches!(check_with(rename, prot), PatchCheck::Rejected(_)));
    }
}
