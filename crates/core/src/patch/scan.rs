//! One pass over the patch lines that follows git apply and GNU patch: which lines are
//! file headers, which are hunk bodies, and what each header names.
//!
//! A hunk body is skipped only where both tools read it as a body (or die before it):
//! a `@@ -` line at column 0 after a header line, with exact line counts. Anything that
//! could make the tools and this reader disagree on where a body ends sets `irregular`,
//! and then every line of the patch, bodies included, is read for names as well.

use std::sync::LazyLock;

use regex::Regex;

use super::names::{self, is_c_space};
use super::{FilePatch, Format, Hunk, Kind, Name};

pub const SYMLINK: u32 = 0o120000;

#[derive(Debug, Default)]
pub struct Scan {
    pub files: Vec<FilePatch>,
    /// Names read outside any file: headers with no hunk after them, every line of an
    /// irregular patch.
    pub stray: Vec<Name>,
    /// Every mode on a mode or index line: (line, mode).
    pub modes: Vec<(usize, u32)>,
    /// First line GNU patch could take for an ed command.
    pub ed: Option<usize>,
    /// First binary patch line.
    pub binary: Option<usize>,
    /// Why, and from which line, bodies were read as possible headers too.
    pub irregular: Option<(usize, &'static str)>,
    /// Lines that start a file header in some format.
    pub header_lines: usize,
}

#[derive(Debug, Clone, Copy)]
enum ModeLine {
    Old,
    New,
    Deleted,
    NewFile,
}

#[derive(Debug)]
enum Line<'a> {
    /// GNU patch skips lines starting with '#'; git reads them as garbage.
    Comment,
    DiffGit(&'a str),
    /// `--- name`; `nested` when RFC 934 "- " prefixes came first.
    Minus(&'a str, bool),
    Plus(&'a str),
    Stars(&'a str),
    StarsRow,
    Index(&'a str),
    /// `rename from/to`, `rename old/new`, `copy from/to`.
    Rename {
        rest: &'a str,
        from: bool,
        copy: bool,
    },
    Mode(ModeLine, Option<u32>),
    GitIndex(Option<u32>),
    Binary,
    Ed,
    NormalCmd,
    Hunk,
    Other,
}

/// Leading indentation GNU patch ignores before a header keyword: spaces, tabs and 'X'.
fn unindent(line: &str) -> (&str, usize) {
    let s = line.trim_start_matches([' ', '\t', 'X']);
    (s, line.len() - s.len())
}

/// The leading octal number; one too large for a mode comes back as `u32::MAX`, which no
/// check accepts.
fn octal(s: &str) -> Option<u32> {
    let s = s.trim_start_matches(|c: char| c.is_ascii() && is_c_space(c as u8));
    let digits: Vec<u32> = s
        .bytes()
        .take_while(|c| (b'0'..=b'7').contains(c))
        .map(|c| u32::from(c - b'0'))
        .collect();
    if digits.is_empty() {
        return None;
    }
    Some(digits.iter().fold(0u32, |m, d| {
        m.checked_mul(8)
            .and_then(|m| m.checked_add(*d))
            .unwrap_or(u32::MAX)
    }))
}

/// GNU patch's `get_ed_command_letter`.
fn is_ed_command(s: &str) -> bool {
    let b = s.as_bytes();
    let mut p = 0;
    let mut pair = false;
    if b.first().is_some_and(u8::is_ascii_digit) {
        while b.get(p).is_some_and(u8::is_ascii_digit) {
            p += 1;
        }
        if b.get(p) == Some(&b',') {
            p += 1;
            if !b.get(p).is_some_and(u8::is_ascii_digit) {
                return false;
            }
            while b.get(p).is_some_and(u8::is_ascii_digit) {
                p += 1;
            }
            pair = true;
        }
    }
    let letter = b.get(p).copied();
    p += 1;
    match letter {
        Some(b'a' | b'i') if !pair => {}
        Some(b'c' | b'd') => {}
        Some(b's') if s.get(p..p + 4) == Some("/.//") => p += 4,
        _ => return false,
    }
    b.get(p..)
        .unwrap_or_default()
        .iter()
        .all(|c| *c == b' ' || *c == b'\t')
}

/// A normal-diff command line: `3,4c5`, `7a8,9`, `2d1`.
fn is_normal_command(s: &str) -> bool {
    static RE: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"^[0-9][0-9,]*[acd][0-9,]*[ \t]*$").ok());
    RE.as_ref().is_some_and(|re| re.is_match(s))
}

fn classify(line: &str) -> (usize, Line<'_>) {
    if line.starts_with('#') {
        return (0, Line::Comment);
    }
    let (s, indent) = unindent(line);
    let kind = if let Some(r) = s.strip_prefix("diff --git ") {
        Line::DiffGit(r)
    } else if s.starts_with("********") {
        Line::StarsRow
    } else if let Some(r) = s.strip_prefix("*** ") {
        Line::Stars(r)
    } else if let Some(r) = s.strip_prefix("+++ ") {
        Line::Plus(r)
    } else if let Some(r) = s.strip_prefix("Index:") {
        Line::Index(r)
    } else if let Some(r) = s.strip_prefix("rename from ") {
        Line::Rename {
            rest: r,
            from: true,
            copy: false,
        }
    } else if let Some(r) = s.strip_prefix("rename old ") {
        Line::Rename {
            rest: r,
            from: true,
            copy: false,
        }
    } else if let Some(r) = s.strip_prefix("rename to ") {
        Line::Rename {
            rest: r,
            from: false,
            copy: false,
        }
    } else if let Some(r) = s.strip_prefix("rename new ") {
        Line::Rename {
            rest: r,
            from: false,
            copy: false,
        }
    } else if let Some(r) = s.strip_prefix("copy from ") {
        Line::Rename {
            rest: r,
            from: true,
            copy: true,
        }
    } else if let Some(r) = s.strip_prefix("copy to ") {
        Line::Rename {
            rest: r,
            from: false,
            copy: true,
        }
    } else if let Some(r) = s.strip_prefix("old mode ") {
        Line::Mode(ModeLine::Old, octal(r))
    } else if let Some(r) = s.strip_prefix("new mode ") {
        Line::Mode(ModeLine::New, octal(r))
    } else if let Some(r) = s.strip_prefix("deleted file mode ") {
        Line::Mode(ModeLine::Deleted, octal(r))
    } else if let Some(r) = s.strip_prefix("new file mode ") {
        Line::Mode(ModeLine::NewFile, octal(r))
    } else if let Some(r) = s.strip_prefix("index ") {
        // "index abc..def 100644": the mode is optional.
        Line::GitIndex(r.split_whitespace().nth(1).and_then(octal))
    } else if s.starts_with("GIT binary patch")
        || (s.starts_with("Binary files ") && s.trim_end().ends_with(" differ"))
    {
        Line::Binary
    } else if s.starts_with("@@ -") {
        Line::Hunk
    } else if is_ed_command(s) {
        Line::Ed
    } else if is_normal_command(s) {
        Line::NormalCmd
    } else {
        // "- - --- name": RFC 934 encapsulation, which GNU patch unwraps.
        let mut t = s;
        while let Some(r) = t.strip_prefix("- ") {
            t = r;
        }
        match t.strip_prefix("--- ") {
            Some(r) => Line::Minus(r, t.len() != s.len()),
            None => Line::Other,
        }
    };
    (indent, kind)
}

/// `@@ -a[,b] +c[,d] @@` in the strict form git accepts (GNU patch reads the same counts).
fn hunk_counts(line: &str) -> Option<(u64, u64, u64, u64)> {
    static RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"^@@ -([0-9]+)(?:,([0-9]+))? \+([0-9]+)(?:,([0-9]+))? @@").ok()
    });
    let c = RE.as_ref()?.captures(line)?;
    let num = |i: usize| -> Option<u64> {
        match c.get(i) {
            Some(m) => m.as_str().parse().ok(),
            None => Some(1),
        }
    };
    Some((num(1)?, num(2)?, num(3)?, num(4)?))
}

enum BodyLine {
    Context,
    Old,
    New,
    Uncounted,
    Foreign,
}

fn body_line(line: &str) -> BodyLine {
    match line.bytes().next() {
        // '\t' and '=' are context to GNU patch only; git calls them corrupt and stops.
        None | Some(b' ' | b'\t' | b'=') => BodyLine::Context,
        Some(b'-') => BodyLine::Old,
        Some(b'+') => BodyLine::New,
        // "\ No newline at end of file"; '#' lines GNU patch skips (git stops).
        Some(b'\\' | b'#') => BodyLine::Uncounted,
        Some(_) => BodyLine::Foreign,
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    Scan,
    Body {
        file: usize,
        old: u64,
        new: u64,
    },
    /// Right after a body: a "\" line, another `@@` of the same file, or the end of it.
    After {
        file: usize,
        first: bool,
    },
}

#[derive(Default)]
struct Pending {
    line: Option<usize>,
    names: Vec<Name>,
    minus: Option<String>,
    plus: Option<String>,
    stars: Option<String>,
    index: Option<String>,
}

struct Scanner<'a> {
    lines: &'a [&'a str],
    out: Scan,
    pending: Pending,
    /// The file whose headers or hunks are being read.
    open: Option<usize>,
    /// GNU patch's `need_header`: no header line since the last file ended.
    need_header: bool,
    /// Only a `diff --git` line cleared `need_header`: GNU patch 2.7.6 then reads a following
    /// `@@` as a hunk, git does not, and other GNU versions may not either.
    only_git: bool,
    /// GNU patch's `stars_last_line`: the previous line it read started with "********".
    prev_stars: bool,
}

/// The patch split as both tools split it: at "\n", one trailing "\r" dropped.
pub fn split_lines(patch: &str) -> Vec<&str> {
    let body = patch.strip_suffix('\n').unwrap_or(patch);
    if body.is_empty() && patch.is_empty() {
        return Vec::new();
    }
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

pub fn scan(lines: &[&str]) -> Scan {
    let mut s = Scanner {
        lines,
        out: Scan::default(),
        pending: Pending::default(),
        open: None,
        need_header: true,
        only_git: false,
        prev_stars: false,
    };
    s.run();
    let mut out = s.out;
    if out.irregular.is_some() {
        flat_scan(lines, &mut out);
    }
    out
}

/// Every line read as a possible header: names, modes, binary and ed markers.
fn flat_scan(lines: &[&str], out: &mut Scan) {
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        let (_, kind) = classify(line);
        let texts = match kind {
            Line::DiffGit(r) => names::git_header_readings(r),
            Line::Minus(r, _) | Line::Plus(r) | Line::Stars(r) => names::header_readings(r, true),
            Line::Index(r) => names::header_readings(r, false),
            Line::Rename { rest, .. } => names::rename_readings(rest),
            Line::Mode(_, Some(m)) | Line::GitIndex(Some(m)) => {
                out.modes.push((n, m));
                Vec::new()
            }
            Line::Binary => {
                out.binary.get_or_insert(n);
                Vec::new()
            }
            Line::Ed => {
                out.ed.get_or_insert(n);
                Vec::new()
            }
            _ => Vec::new(),
        };
        out.stray
            .extend(texts.into_iter().map(|text| Name { line: n, text }));
    }
}

impl Scanner<'_> {
    fn run(&mut self) {
        let mut state = State::Scan;
        let mut i = 0;
        while let Some(&line) = self.lines.get(i) {
            match state {
                State::Scan => {
                    state = self.scan_line(i);
                    if !matches!(state, State::Scan) {
                        self.prev_stars = false;
                    }
                    i += 1;
                }
                State::Body { file, old, new } => {
                    let (old, new) = match body_line(line) {
                        BodyLine::Context if old > 0 && new > 0 => (old - 1, new - 1),
                        BodyLine::Old if old > 0 => (old - 1, new),
                        BodyLine::New if new > 0 => (old, new - 1),
                        BodyLine::Uncounted => (old, new),
                        _ => {
                            self.irregular(i, "a hunk body does not match its line counts");
                            self.end_body(file, i);
                            self.close();
                            state = State::Scan;
                            continue;
                        }
                    };
                    i += 1;
                    state = if old == 0 && new == 0 {
                        self.end_body(file, i);
                        State::After { file, first: true }
                    } else {
                        State::Body { file, old, new }
                    };
                }
                State::After { file, first } => {
                    if line.starts_with('\\') && first {
                        self.end_body(file, i + 1);
                        state = State::After { file, first: false };
                        i += 1;
                    } else if line.starts_with('#') {
                        state = State::After { file, first: false };
                        i += 1;
                    } else if line.starts_with("@@ -") {
                        state = self.start_hunk(i, file);
                        i += 1;
                    } else {
                        if line.starts_with('\\') {
                            self.irregular(i, "a stray \"\\\" line after a hunk");
                        }
                        self.close();
                        state = State::Scan;
                    }
                }
            }
        }
        if let State::Body { file, .. } = state {
            self.end_body(file, self.lines.len());
        }
        self.close();
        let names = std::mem::take(&mut self.pending.names);
        self.out.stray.extend(names);
    }

    fn irregular(&mut self, i: usize, why: &'static str) {
        self.out.irregular.get_or_insert((i + 1, why));
    }

    fn add_names(&mut self, i: usize, texts: Vec<String>) {
        let names = texts.into_iter().map(|text| Name { line: i + 1, text });
        match self.open {
            Some(f) => self.out.files[f].names.extend(names),
            None => {
                self.pending.line.get_or_insert(i + 1);
                self.pending.names.extend(names);
            }
        }
    }

    fn header_seen(&mut self) {
        self.need_header = false;
        self.only_git = false;
    }

    fn scan_line(&mut self, i: usize) -> State {
        let line = self.lines[i];
        let (indent, kind) = classify(line);
        let after_row = self.prev_stars;
        if !matches!(kind, Line::Comment) {
            self.prev_stars = matches!(kind, Line::StarsRow);
        }
        match kind {
            Line::DiffGit(rest) => self.diff_git(i, rest),
            Line::Minus(rest, nested) => self.minus(i, rest, nested),
            Line::Plus(rest) => self.plus(i, rest),
            Line::Stars(rest) => self.stars(i, rest, after_row),
            Line::Index(rest) => {
                self.out.header_lines += 1;
                self.add_names(i, names::header_readings(rest, false));
                self.header_seen();
                self.pending.index = Some(rest.to_string());
            }
            Line::Rename { rest, from, copy } => self.rename(i, rest, from, copy),
            Line::Mode(which, mode) => self.mode(i, which, mode),
            Line::GitIndex(mode) => self.git_index(i, mode),
            Line::Binary => {
                self.out.binary.get_or_insert(i + 1);
                if let Some(f) = self.open {
                    self.out.files[f].binary = true;
                }
            }
            Line::Ed => {
                self.out.ed.get_or_insert(i + 1);
            }
            Line::NormalCmd => self.normal_cmd(i),
            Line::Hunk => return self.hunk(i, indent),
            Line::Comment | Line::StarsRow | Line::Other => {}
        }
        State::Scan
    }

    /// `diff --git a/x b/y`: a new file patch, its names from the header.
    fn diff_git(&mut self, i: usize, rest: &str) {
        self.out.header_lines += 1;
        self.close();
        let old = std::mem::take(&mut self.pending);
        self.out.stray.extend(old.names);
        let def = names::git_header_name(rest, 1).map(|n| names::squash(&n));
        let (a, b) = names::git_header_tokens(rest);
        self.out.files.push(FilePatch {
            line: i + 1,
            format: Format::Git,
            kind: Kind::Modify,
            old_path: def.clone(),
            new_path: def,
            raw_old: Some(a),
            raw_new: Some(b),
            ..FilePatch::default()
        });
        self.open = Some(self.out.files.len() - 1);
        self.add_names(i, names::git_header_readings(rest));
        self.need_header = false;
        self.only_git = true;
    }

    /// `--- name`: the old name (a git patch's, or the next file's).
    fn minus(&mut self, i: usize, rest: &str, nested: bool) {
        self.out.header_lines += 1;
        if nested {
            self.irregular(i, "an RFC 934 \"- \" nested header");
        }
        self.add_names(i, names::header_readings(rest, true));
        self.header_seen();
        match self.open_git() {
            Some(f) => {
                let f = &mut self.out.files[f];
                f.raw_old = Some(raw_name(rest));
                match names::git_name(rest) {
                    Some(n) => f.old_path = Some(n),
                    None => {
                        f.old_path = None;
                        f.kind = Kind::Create;
                    }
                }
            }
            None => self.pending.minus = Some(rest.to_string()),
        }
    }

    /// `+++ name`: the new name.
    fn plus(&mut self, i: usize, rest: &str) {
        self.out.header_lines += 1;
        self.add_names(i, names::header_readings(rest, true));
        self.header_seen();
        match self.open_git() {
            Some(f) => {
                let f = &mut self.out.files[f];
                f.raw_new = Some(raw_name(rest));
                match names::git_name(rest) {
                    Some(n) => f.new_path = Some(n),
                    None => {
                        f.new_path = None;
                        f.kind = Kind::Delete;
                    }
                }
            }
            None => self.pending.plus = Some(rest.to_string()),
        }
    }

    /// `*** name`, a context diff's header, or the start of a context hunk after a row of
    /// stars.
    fn stars(&mut self, i: usize, rest: &str, after_row: bool) {
        self.out.header_lines += 1;
        self.add_names(i, names::header_readings(rest, true));
        if after_row {
            // A context hunk when a header came first; GNU patch reads no name here.
            if !self.need_header {
                self.irregular(i, "a context diff");
                if self.open.is_none() {
                    self.file_from_pending(i, Format::Context);
                    self.close();
                }
            }
        } else {
            self.header_seen();
            self.pending.stars = Some(rest.to_string());
        }
    }

    /// `rename from/to`, `copy from/to` of a git patch.
    fn rename(&mut self, i: usize, rest: &str, from: bool, copy: bool) {
        self.add_names(i, names::rename_readings(rest));
        if let Some(f) = self.open_git() {
            let f = &mut self.out.files[f];
            let name = Some(names::rename_name(rest));
            f.kind = if copy { Kind::Copy } else { Kind::Rename };
            if from {
                f.raw_old.clone_from(&name);
                f.old_path = name;
            } else {
                f.raw_new.clone_from(&name);
                f.new_path = name;
            }
        }
    }

    /// `old mode`, `new mode`, `deleted file mode`, `new file mode` of a git patch.
    fn mode(&mut self, i: usize, which: ModeLine, mode: Option<u32>) {
        if let Some(m) = mode {
            self.out.modes.push((i + 1, m));
        }
        if let Some(f) = self.open_git() {
            let f = &mut self.out.files[f];
            match which {
                ModeLine::Old => f.old_mode = mode,
                ModeLine::New => f.new_mode = mode,
                ModeLine::Deleted => {
                    f.old_mode = mode;
                    f.kind = Kind::Delete;
                    f.new_path = None;
                }
                ModeLine::NewFile => {
                    f.new_mode = mode;
                    f.kind = Kind::Create;
                    f.old_path = None;
                }
            }
        }
    }

    /// `index abc..def 100644`: the mode when no mode line gave it.
    fn git_index(&mut self, i: usize, mode: Option<u32>) {
        if let Some(m) = mode {
            self.out.modes.push((i + 1, m));
            if let Some(f) = self.open_git() {
                let f = &mut self.out.files[f];
                if f.old_mode.is_none() && f.kind != Kind::Create {
                    f.old_mode = Some(m);
                }
                if f.new_mode.is_none() && f.kind != Kind::Delete {
                    f.new_mode = Some(m);
                }
            }
        }
    }

    /// A normal diff's command line (`3c3`), when `<`/`>` lines follow.
    fn normal_cmd(&mut self, i: usize) {
        let next = self.lines.get(i + 1).map(|l| unindent(l).0);
        if next.is_some_and(|n| n.starts_with("< ") || n.starts_with("> ")) {
            self.irregular(i, "a normal diff");
            if !self.need_header && self.open.is_none() {
                self.file_from_pending(i, Format::Normal);
                self.close();
            }
        }
    }

    /// `@@ ... @@`: a unified hunk of the open file, or of one made from the pending names.
    fn hunk(&mut self, i: usize, indent: usize) -> State {
        if indent > 0 {
            self.irregular(i, "an indented hunk");
            return State::Scan;
        }
        if self.need_header {
            // GNU patch skips it; git stops at "patch fragment without header".
            return State::Scan;
        }
        if self.only_git {
            self.irregular(i, "a hunk after diff --git with no ---/+++ lines");
        }
        let file = match self.open {
            Some(f) => f,
            None => self.file_from_pending(i, Format::Unified),
        };
        self.start_hunk(i, file)
    }

    fn open_git(&self) -> Option<usize> {
        self.open.filter(|&f| {
            self.out.files[f].format == Format::Git && self.out.files[f].hunks.is_empty()
        })
    }

    fn start_hunk(&mut self, i: usize, file: usize) -> State {
        self.open = Some(file);
        let Some((old_start, old_lines, new_start, new_lines)) = hunk_counts(self.lines[i]) else {
            self.irregular(i, "an unreadable @@ line");
            self.close();
            return State::Scan;
        };
        self.out.files[file].hunks.push(Hunk {
            line: i + 1,
            old_start,
            old_lines,
            new_start,
            new_lines,
            body: i + 1..i + 1,
        });
        if old_lines == 0 && new_lines == 0 {
            State::After { file, first: true }
        } else {
            State::Body {
                file,
                old: old_lines,
                new: new_lines,
            }
        }
    }

    fn end_body(&mut self, file: usize, end: usize) {
        if let Some(h) = self.out.files[file].hunks.last_mut() {
            h.body.end = end;
        }
    }

    fn file_from_pending(&mut self, i: usize, format: Format) -> usize {
        let p = std::mem::take(&mut self.pending);
        let gnu =
            |r: &Option<String>, stamp: bool| r.as_deref().and_then(|r| names::gnu_name(r, stamp));
        let (old, new, raw_old, raw_new) = match format {
            Format::Context => (
                gnu(&p.stars, true),
                gnu(&p.minus, true),
                p.stars.as_deref().map(raw_name),
                p.minus.as_deref().map(raw_name),
            ),
            _ => (
                p.minus.as_deref().and_then(names::git_name),
                p.plus.as_deref().and_then(names::git_name),
                p.minus.as_deref().map(raw_name),
                p.plus.as_deref().map(raw_name),
            ),
        };
        let created = p.minus.as_deref().is_some_and(names::is_dev_null);
        let deleted = p.plus.as_deref().is_some_and(names::is_dev_null);
        let index = gnu(&p.index, false);
        let kind = if created {
            Kind::Create
        } else if deleted {
            Kind::Delete
        } else {
            Kind::Modify
        };
        let (old_path, new_path) = match (old, new) {
            (None, None) if !created && !deleted => (index.clone(), index),
            (o, n) => (
                if created {
                    None
                } else {
                    o.or_else(|| n.clone())
                },
                if deleted { None } else { n },
            ),
        };
        self.out.files.push(FilePatch {
            line: p.line.unwrap_or(i + 1),
            format,
            kind,
            old_path,
            new_path,
            raw_old,
            raw_new,
            names: p.names,
            ..FilePatch::default()
        });
        let f = self.out.files.len() - 1;
        self.open = Some(f);
        f
    }

    /// The open file is complete: the next header line starts another.
    fn close(&mut self) {
        let Some(f) = self.open.take() else {
            return;
        };
        self.need_header = true;
        self.only_git = false;
        let lines = self.lines;
        let file = &mut self.out.files[f];
        if file.new_mode.is_some_and(|m| m & 0o170000 == SYMLINK) && !file.hunks.is_empty() {
            file.symlink_target = Some(side_text(lines, &file.hunks, true));
        }
        if file.old_mode.is_some_and(|m| m & 0o170000 == 0o160000)
            || file.new_mode.is_some_and(|m| m & 0o170000 == 0o160000)
        {
            file.submodule = true;
        }
    }
}

/// The name as written on a `---`/`+++` line: up to the tab that starts a timestamp.
fn raw_name(rest: &str) -> String {
    let t = rest.trim_start();
    match names::unquote_c(t) {
        Some(_) => t[..t.rfind('"').map_or(t.len(), |e| e + 1)].to_string(),
        None => t.split('\t').next().unwrap_or("").trim_end().to_string(),
    }
}

/// The old (`new == false`) or new side of the hunks: context lines and removed or added
/// lines, joined by "\n", without the line prefixes.
pub fn side_text(lines: &[&str], hunks: &[Hunk], new: bool) -> String {
    let want = if new { b'+' } else { b'-' };
    let mut out: Vec<&str> = Vec::new();
    for h in hunks {
        for l in lines.get(h.body.clone()).unwrap_or_default() {
            match l.bytes().next() {
                None => out.push(""),
                Some(c) if c == want || c == b' ' || c == b'=' => out.push(&l[1..]),
                _ => {}
            }
        }
    }
    out.join("\n")
}
