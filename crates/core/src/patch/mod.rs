//! Checks on a patch made on the host, before any container.
//!
//! The patch is applied by a cascade of `git apply` and, last, GNU `patch --batch -p1`
//! (container/programs/apply_patch.sh). Each reads file names its own way: git strips any first
//! component (`x/bench.py` is `bench.py`), guesses `-p0` for a traditional diff whose
//! names have no slash and keeps that guess for the rest of the patch, takes a quoted name
//! it cannot decode literally; GNU patch also reads context diffs, `Index:` lines,
//! indented headers, picks among several names, assumes `-R` for a patch that looks
//! reversed, and writes through symlinks it has just created. So every name any of these
//! readings could produce is checked, and the patch is refused if one of them is bad.

mod human;
mod names;
mod scan;

pub use human::{HumanPart, human_part};

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::ops::Range;

use crate::task::Task;
use scan::SYMLINK;

/// Patches above this size are refused rather than copied into a container.
pub const MAX_PATCH_BYTES: usize = 20 * 1024 * 1024;

const GITLINK: u32 = 0o160000;
const REGULAR: u32 = 0o100000;
const TYPE_BITS: u32 = 0o170000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchCheck {
    /// Nothing to apply (empty, null or whitespace only).
    Empty,
    /// No file header of any diff format: the reason says what was found instead.
    NotADiff(String),
    /// Not applied: the reason names the path (or line) and the rule.
    Rejected(String),
    /// May be applied; these are the repository paths it touches, old and new sides.
    Ok(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// `diff --git` with its extended header lines.
    #[default]
    Git,
    /// `---`/`+++` (or `Index:`) and `@@` hunks.
    Unified,
    /// `***`/`---` and `***************` hunks; only GNU patch reads these.
    Context,
    /// `3c3` / `< a` / `> b`; only GNU patch reads these, naming the file by `Index:`.
    Normal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    Create,
    Delete,
    #[default]
    Modify,
    Rename,
    Copy,
}

/// A name some tool could read from a header line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    /// 1-based line of the patch.
    pub line: usize,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// 1-based line of its `@@` line.
    pub line: usize,
    pub old_start: u64,
    pub old_lines: u64,
    pub new_start: u64,
    pub new_lines: u64,
    /// 0-based indices of its body lines in the patch split at "\n".
    pub body: Range<usize>,
}

/// One file of a patch, as git apply reads it (GNU patch's reading for the formats git
/// does not read).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilePatch {
    /// 1-based line of its first header line.
    pub line: usize,
    pub format: Format,
    pub kind: Kind,
    /// Repository path before, after `-p1` (`None` when the file is created).
    pub old_path: Option<String>,
    /// Repository path after (`None` when the file is deleted).
    pub new_path: Option<String>,
    /// Old and new names as written in the header, prefix and all.
    pub raw_old: Option<String>,
    pub raw_new: Option<String>,
    pub old_mode: Option<u32>,
    pub new_mode: Option<u32>,
    pub binary: bool,
    /// Mode 160000 on either side.
    pub submodule: bool,
    /// What a symlink the patch creates or changes points to (the new side of its hunk).
    pub symlink_target: Option<String>,
    pub hunks: Vec<Hunk>,
    /// Every name any tool could take for this file, as written and stripped.
    pub names: Vec<Name>,
}

/// Parsed per-file view, for logs and tests.
pub fn parse(patch: &str) -> Vec<FilePatch> {
    scan::scan(&scan::split_lines(patch)).files
}

/// How much a patch changes: the files it touches and the lines its hunks add and remove.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChangeSize {
    pub files: usize,
    pub added: usize,
    pub removed: usize,
}

/// The size of `patch` as git reads it (binary files count as files with no lines).
pub fn change_size(patch: &str) -> ChangeSize {
    let lines = scan::split_lines(patch);
    let files = scan::scan(&lines).files;
    let mut size = ChangeSize {
        files: files.len(),
        ..ChangeSize::default()
    };
    for line in files
        .iter()
        .flat_map(|f| &f.hunks)
        .flat_map(|h| lines.get(h.body.clone()).unwrap_or(&[]))
    {
        match line.as_bytes().first() {
            Some(b'+') => size.added += 1,
            Some(b'-') => size.removed += 1,
            _ => {}
        }
    }
    size
}

/// A patch whose last line lacks "\n" gets one (git apply calls such a patch corrupt).
pub fn normalise(patch: &str) -> Cow<'_, str> {
    if patch.is_empty() || patch.ends_with('\n') {
        Cow::Borrowed(patch)
    } else {
        Cow::Owned(format!("{patch}\n"))
    }
}

pub fn check(patch: &str, task: &Task, base_symlinks: &BTreeSet<String>) -> PatchCheck {
    check_with(patch, |p| task.is_protected(p), base_symlinks)
}

pub fn check_with(
    patch: &str,
    is_protected: impl Fn(&str) -> bool,
    base_symlinks: &BTreeSet<String>,
) -> PatchCheck {
    if patch.trim().is_empty() {
        return PatchCheck::Empty;
    }
    if patch.len() > MAX_PATCH_BYTES {
        return PatchCheck::Rejected(format!(
            "patch is {} bytes, above the limit of {MAX_PATCH_BYTES}",
            patch.len()
        ));
    }
    if let Some(at) = patch.find('\0') {
        return PatchCheck::Rejected(format!(
            "NUL byte at offset {at}: patch tools cut names there"
        ));
    }
    let lines = scan::split_lines(patch);
    let scan = scan::scan(&lines);
    let checker = Checker {
        lines: &lines,
        scan: &scan,
        is_protected: &is_protected,
        base_symlinks: base_symlinks.iter().map(|s| normal(s)).collect(),
    };
    if let Err(why) = checker.run() {
        return PatchCheck::Rejected(why);
    }
    if scan.files.is_empty() {
        return PatchCheck::NotADiff(if scan.header_lines == 0 {
            "no file header of any diff format (diff --git, ---/+++, ***, Index:)".into()
        } else {
            format!(
                "{} header line(s) but no hunk or git header after them",
                scan.header_lines
            )
        });
    }
    let mut seen = BTreeSet::new();
    let mut paths: Vec<String> = Vec::new();
    for f in &scan.files {
        for p in [&f.old_path, &f.new_path].into_iter().flatten() {
            if seen.insert(p) {
                paths.push(p.clone());
            }
        }
    }
    PatchCheck::Ok(paths)
}

/// Path components, without empty and `.` ones.
fn components(p: &str) -> Vec<&str> {
    p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect()
}

fn normal(p: &str) -> String {
    components(p).join("/")
}

/// `dir/../x` resolved lexically; `None` when it climbs above the repository.
fn resolve(p: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for c in components(p) {
        if c == ".." {
            out.pop()?;
        } else {
            out.push(c);
        }
    }
    Some(out.join("/"))
}

fn is_dot_git(c: &str) -> bool {
    c.eq_ignore_ascii_case(".git")
}

struct Checker<'a> {
    lines: &'a [&'a str],
    scan: &'a scan::Scan,
    is_protected: &'a dyn Fn(&str) -> bool,
    base_symlinks: BTreeSet<String>,
}

impl Checker<'_> {
    fn run(&self) -> Result<(), String> {
        let s = self.scan;
        if let Some(line) = s.ed {
            return Err(format!(
                "line {line} {:?} is an ed script command: GNU patch would pipe it to ed, \
                 which can run shell commands",
                self.line(line)
            ));
        }
        if let Some(line) = s.binary {
            let file = s.files.iter().find(|f| f.binary);
            let path = file.and_then(|f| f.new_path.clone().or(f.old_path.clone()));
            return Err(format!(
                "binary patch{} at line {line}: binary changes are not accepted",
                path.map(|p| format!(" for {p:?}")).unwrap_or_default()
            ));
        }
        for &(line, mode) in &s.modes {
            self.mode(line, mode)?;
        }
        for name in self.all_names() {
            self.name(name)?;
        }
        self.symlinks()
    }

    fn line(&self, n: usize) -> &str {
        self.lines.get(n.wrapping_sub(1)).copied().unwrap_or("")
    }

    fn all_names(&self) -> impl Iterator<Item = &Name> {
        self.scan
            .files
            .iter()
            .flat_map(|f| f.names.iter())
            .chain(self.scan.stray.iter())
    }

    fn mode(&self, line: usize, mode: u32) -> Result<(), String> {
        let at = || format!("mode {mode:o} at line {line} ({:?})", self.line(line));
        if mode & TYPE_BITS == GITLINK {
            return Err(format!("{}: submodules (gitlinks) are not accepted", at()));
        }
        if mode & 0o7000 != 0 {
            return Err(format!(
                "{}: setuid, setgid or sticky bits are not accepted",
                at()
            ));
        }
        if mode & TYPE_BITS != REGULAR && mode & TYPE_BITS != SYMLINK {
            return Err(format!("{}: only files and symlinks may be patched", at()));
        }
        if mode & TYPE_BITS == SYMLINK
            && let Some((from, why)) = self.scan.irregular
        {
            return Err(format!(
                "{}: a symlink in a patch whose hunks cannot be delimited reliably \
                 ({why} at line {from})",
                at()
            ));
        }
        Ok(())
    }

    /// The rules on one name reading.
    fn name(&self, n: &Name) -> Result<(), String> {
        let p = n.text.as_str();
        let at = format!("path {p:?} (line {})", n.line);
        // A quoted name's bytes that are not UTF-8 come back as U+FFFD: a name the harness
        // could not show, compare or carry faithfully.
        if p.contains('\u{FFFD}') {
            return Err(format!("{at} is not UTF-8"));
        }
        if p.starts_with('/') {
            return Err(format!("{at} is absolute"));
        }
        let comps = components(p);
        if comps.contains(&"..") {
            return Err(format!("{at} escapes the repository (.. component)"));
        }
        if comps.iter().any(|c| is_dot_git(c)) {
            return Err(format!("{at} is inside .git"));
        }
        let norm = comps.join("/");
        if norm.is_empty() {
            return Ok(());
        }
        if (self.is_protected)(&norm) || (self.is_protected)(p) {
            return Err(format!("{at} is protected"));
        }
        for k in 1..comps.len() {
            let prefix = comps[..k].join("/");
            if self.base_symlinks.contains(&prefix) {
                return Err(format!(
                    "{at} goes through {prefix:?}, a symlink in the base tree"
                ));
            }
        }
        Ok(())
    }

    fn symlinks(&self) -> Result<(), String> {
        let files = &self.scan.files;
        // The paths as git reads them first, so that a reason names them.
        let normal_names = |f: &FilePatch| -> Vec<String> {
            let mut out: Vec<String> = Vec::new();
            let shown = [&f.new_path, &f.old_path].into_iter().flatten();
            for n in shown.chain(f.names.iter().map(|n| &n.text)) {
                let n = normal(n);
                if !n.is_empty() && !out.contains(&n) {
                    out.push(n);
                }
            }
            out
        };
        let is_link = |m: Option<u32>| m.is_some_and(|m| m & TYPE_BITS == SYMLINK);
        // Every path that is a symlink before, during or after the patch; GNU patch may
        // also apply a file reversed, so a deleted symlink counts as one.
        let mut links: BTreeSet<String> = self.base_symlinks.clone();
        let mut made: Vec<(usize, Vec<String>)> = Vec::new();
        for (i, f) in files.iter().enumerate() {
            if is_link(f.old_mode) || is_link(f.new_mode) {
                let names = normal_names(f);
                links.extend(names.iter().cloned());
                if is_link(f.new_mode) {
                    made.push((i, names));
                }
            }
        }
        for (i, f) in files.iter().enumerate() {
            let names = normal_names(f);
            let on_base = names.iter().any(|n| self.base_symlinks.contains(n));
            let link = is_link(f.old_mode) || is_link(f.new_mode) || on_base;
            let shown = f
                .new_path
                .clone()
                .or(f.old_path.clone())
                .unwrap_or_default();
            for n in &names {
                let comps: Vec<&str> = n.split('/').collect();
                for k in 1..comps.len() {
                    let prefix = comps[..k].join("/");
                    if links.contains(&prefix) {
                        return Err(format!(
                            "path {n:?} (line {}) goes through {prefix:?}, a symlink",
                            f.line
                        ));
                    }
                }
            }
            for (j, made_names) in &made {
                if *j < i
                    && let Some(n) = names.iter().find(|n| made_names.contains(n))
                {
                    return Err(format!(
                        "path {n:?} (line {}) is written after line {} made it a symlink",
                        f.line, files[*j].line
                    ));
                }
            }
            if !link {
                continue;
            }
            if matches!(f.kind, Kind::Rename | Kind::Copy) {
                return Err(format!(
                    "symlink {shown:?} (line {}) is renamed or copied: its target is not in \
                     the patch",
                    f.line
                ));
            }
            if f.hunks.is_empty() {
                let unchanged = f.kind == Kind::Modify && f.old_mode == f.new_mode;
                if f.kind == Kind::Delete || unchanged {
                    continue;
                }
                return Err(format!(
                    "symlink {shown:?} (line {}) has no hunk: its target is not in the patch",
                    f.line
                ));
            }
            for new in [true, false] {
                let text = scan::side_text(self.lines, &f.hunks, new);
                let mut targets: Vec<&str> = text.split('\n').collect();
                targets.push(&text);
                for t in targets {
                    for n in &names {
                        self.target(n, t, &links, f.line)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A symlink at `link` pointing to `target`: it must stay in the tree, off .git, off
    /// protected paths and off other symlinks.
    fn target(
        &self,
        link: &str,
        target: &str,
        links: &BTreeSet<String>,
        line: usize,
    ) -> Result<(), String> {
        if target.is_empty() {
            return Ok(());
        }
        let at = format!("symlink {link:?} -> {target:?} (line {line})");
        if target.starts_with('/') {
            return Err(format!("{at}: the target is absolute"));
        }
        let dir = link.rsplit_once('/').map_or("", |(d, _)| d);
        let Some(resolved) = resolve(&format!("{dir}/{target}")) else {
            return Err(format!("{at}: the target is outside the repository"));
        };
        let comps = components(&resolved);
        if comps.iter().any(|c| is_dot_git(c)) {
            return Err(format!("{at}: the target is inside .git"));
        }
        // A link to a protected folder: the folder itself may not match, its files do.
        if (self.is_protected)(&resolved)
            || (!resolved.is_empty() && (self.is_protected)(&format!("{resolved}/_")))
        {
            return Err(format!("{at}: the target {resolved:?} is protected"));
        }
        for k in 1..=comps.len() {
            let prefix = comps[..k].join("/");
            if prefix != link && links.contains(&prefix) {
                return Err(format!(
                    "{at}: the target goes through the symlink {prefix:?}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tool_tests;
