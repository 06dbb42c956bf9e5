//! The protected files a sample changes exactly as the task's human does. The human's diff
//! is the task's own and trusted (applied whole, protected files and all, as GSO applies
//! it); a sample whose section of such a file is the human's, every header and hunk line
//! alike, takes the human's version of that file, applied as the human's is. Any other
//! change to a protected file is still refused.

use std::collections::{BTreeMap, BTreeSet};

use super::{FilePatch, scan};

/// What of a sample is the human's own change to protected files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HumanPart {
    /// The protected paths (old and new names) the sample changes as the human does.
    pub paths: BTreeSet<String>,
    /// Every name a tool could read for those files (as written and stripped): what the
    /// protection check must let through for them.
    pub names: BTreeSet<String>,
    /// The sample's sections of those files, as a patch of their own.
    pub patch: String,
}

/// A file's change as a comparable value: kind, paths, modes, and each hunk with its lines.
fn key(f: &FilePatch, lines: &[&str]) -> Option<String> {
    if f.binary || f.submodule {
        return None;
    }
    let mut k = format!(
        "{:?}\0{:?}\0{:?}\0{:?}\0{:?}\0{:?}",
        f.kind, f.old_path, f.new_path, f.old_mode, f.new_mode, f.symlink_target
    );
    for h in &f.hunks {
        k.push_str(&format!(
            "\0@@{},{},{},{}",
            h.old_start, h.old_lines, h.new_start, h.new_lines
        ));
        for l in lines.get(h.body.clone())? {
            k.push('\0');
            k.push_str(l);
        }
    }
    Some(k)
}

/// The paths a file's change names.
fn paths(f: &FilePatch) -> impl Iterator<Item = &String> {
    [&f.old_path, &f.new_path].into_iter().flatten()
}

/// The sample's sections on protected files that are the human's, every line alike.
pub fn human_part(sample: &str, human: &str, is_protected: impl Fn(&str) -> bool) -> HumanPart {
    let human_lines = scan::split_lines(human);
    let human_files = scan::scan(&human_lines).files;
    let theirs: BTreeMap<String, String> = human_files
        .iter()
        .filter_map(|f| {
            Some((
                f.new_path.clone().or(f.old_path.clone())?,
                key(f, &human_lines)?,
            ))
        })
        .collect();
    let lines = scan::split_lines(sample);
    let files = scan::scan(&lines).files;
    let mut part = HumanPart::default();
    for (i, f) in files.iter().enumerate() {
        if !paths(f).any(|p| is_protected(p)) {
            continue;
        }
        let Some(name) = f.new_path.clone().or(f.old_path.clone()) else {
            continue;
        };
        if key(f, &lines).is_none() || theirs.get(&name) != key(f, &lines).as_ref() {
            continue;
        }
        part.paths.extend(paths(f).cloned());
        part.names.extend(paths(f).cloned());
        part.names.extend(f.names.iter().map(|n| n.text.clone()));
        let start = f.line.saturating_sub(1);
        let end = files
            .get(i + 1)
            .map_or(lines.len(), |next| next.line.saturating_sub(1));
        for l in lines.get(start..end).unwrap_or(&[]) {
            part.patch.push_str(l);
            part.patch.push('\n');
        }
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUMAN: &str = "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n@@ -1 +1 @@\n-slow\n+fast\ndiff --git a/tests/conftest.py b/tests/conftest.py\n--- a/tests/conftest.py\n+++ b/tests/conftest.py\n@@ -1,2 +1,2 @@\n import x\n-old = 1\n+new = 1\n";

    fn protected(p: &str) -> bool {
        p.starts_with("tests/")
    }

    #[test]
    fn the_humans_own_change_to_a_protected_file_is_the_humans() {
        // The human's diff as a sample: its protected section is the human's.
        let part = human_part(HUMAN, HUMAN, protected);
        assert_eq!(part.paths.iter().collect::<Vec<_>>(), ["tests/conftest.py"]);
        assert!(
            part.patch.starts_with("diff --git a/tests/conftest.py"),
            "{}",
            part.patch
        );
        assert!(part.patch.ends_with("+new = 1\n"), "{}", part.patch);
        assert!(!part.patch.contains("src/m.py"), "{}", part.patch);
        // One line otherwise: not the human's.
        let other = HUMAN.replace("+new = 1", "+new = 2");
        assert!(human_part(&other, HUMAN, protected).paths.is_empty());
        // The same lines at another place: not the human's either.
        let moved = HUMAN.replace("@@ -1,2 +1,2 @@\n import x", "@@ -2,2 +2,2 @@\n import x");
        assert!(human_part(&moved, HUMAN, protected).paths.is_empty());
        // A protected file the human does not touch.
        let own = "diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(human_part(own, HUMAN, protected).paths.is_empty());
    }
}
