//! Predictions: JSONL or JSON files of agent patches, one row per (instance, sample).
//!
//! Reading is bounded: JSONL goes line by line (a line above [`MAX_LINE_BYTES`] is skipped
//! without ever being held whole) and a patch above `max_patch_bytes` is kept only as its
//! size and hash. Input that cannot be read unambiguously (the same sample twice, mixed
//! `sample` declarations, a file that cannot be read) is collected over all files and
//! returned as one error; anything else is a warning naming file and line, and the rest
//! still counts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use sha2::{Digest, Sha256};

/// A JSONL line longer than this is skipped (read and discarded in chunks).
pub const MAX_LINE_BYTES: usize = 256 << 20;

/// A line buffer grown above this by one long line is given back before the next line.
const KEEP_BUFFER_BYTES: usize = 16 << 20;

/// How many lines a warning lists before "and N more".
const SHOWN_PLACES: usize = 20;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The submitted patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchBody {
    /// `null` or `""`.
    Empty,
    Text(String),
    /// Longer than `max_patch_bytes`: the text was dropped once measured and hashed.
    TooLarge {
        bytes: usize,
        sha256: String,
    },
}

/// One submitted patch, with the sample index it was resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    pub instance_id: String,
    /// As submitted ("" when absent).
    pub model_name_or_path: String,
    pub body: PatchBody,
    pub sample: usize,
    /// "file:line" (JSONL), "file:[i]", "file:{id}" or "file:{id}[j]" (JSON).
    pub origin: String,
}

impl Prediction {
    /// The patch text; "" unless the body is [`PatchBody::Text`].
    pub fn patch_text(&self) -> &str {
        match &self.body {
            PatchBody::Text(t) => t,
            PatchBody::Empty | PatchBody::TooLarge { .. } => "",
        }
    }

    /// SHA-256 (hex) of the full patch text, also for a patch too large to keep.
    pub fn patch_sha256(&self) -> String {
        match &self.body {
            PatchBody::TooLarge { sha256, .. } => sha256.clone(),
            PatchBody::Empty | PatchBody::Text(_) => sha256_hex(self.patch_text().as_bytes()),
        }
    }
}

#[derive(Debug, Default)]
pub struct Predictions {
    /// Instance id -> sample index -> row; gaps allowed.
    pub by_instance: BTreeMap<String, BTreeMap<usize, Prediction>>,
    /// Problems that did not stop loading; each names file and line.
    pub warnings: Vec<String>,
}

impl Predictions {
    /// How many predictions there are, over all instances and samples.
    pub fn total(&self) -> usize {
        self.by_instance.values().map(BTreeMap::len).sum()
    }
}

#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `--model`: rows naming another `model_name_or_path` are not used.
    pub model: String,
    pub max_patch_bytes: usize,
}

/// Loads the predictions of `opts.model`. With several files, file i holds sample i; with
/// one, each instance's rows give their own `sample` on every row, or on none (file order).
///
/// Err: input that cannot be read unambiguously (a file that cannot be read, duplicates,
/// mixed sample declarations); the message lists every such problem of every file, each
/// with file:line, one a line.
pub fn load(paths: &[PathBuf], opts: &LoadOptions) -> anyhow::Result<Predictions> {
    load_bounded(paths, opts, MAX_LINE_BYTES)
}

fn load_bounded(
    paths: &[PathBuf],
    opts: &LoadOptions,
    max_line: usize,
) -> anyhow::Result<Predictions> {
    let mut warnings = Vec::new();
    let mut problems = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        let mut scan = FileScan::new(path, opts);
        if let Err(problem) = scan.read(path, max_line) {
            problems.push(problem);
        }
        warnings.extend(scan.finish());
        files.push(scan.rows);
    }
    let (by_instance, used) = assign_samples(&files, &mut warnings, &mut problems);
    for (fi, f) in files.iter().enumerate() {
        if used[fi] == 0 && f.readable {
            let note = if files.len() > 1 {
                format!(" (sample {fi} of every instance is missing)")
            } else {
                String::new()
            };
            warnings.push(format!(
                "{}: no usable prediction for --model {:?}{note}",
                f.file, opts.model
            ));
        }
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "the predictions cannot be read unambiguously ({} problem(s)):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
    Ok(Predictions {
        by_instance,
        warnings,
    })
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

// ---------------------------------------------------------------------------------------
// Reading one file

/// A row attributable to an instance of this model; `prediction` is None for a defective
/// row (already warned about), which still holds its place among the instance's samples
/// so that a later row does not take a defective one's place.
struct Entry {
    instance_id: String,
    declared: Declared,
    loc: String,
    origin: String,
    prediction: Option<(String, PatchBody)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Declared {
    /// No `sample` field (or null).
    No,
    Index(usize),
    /// A `sample` field that is not an index (warned about).
    Invalid,
}

struct FileRows {
    file: String,
    /// JSON document (places are `[i]`/`{id}`) rather than JSONL (places are line numbers).
    json: bool,
    readable: bool,
    entries: Vec<Entry>,
}

struct FileScan<'a> {
    opts: &'a LoadOptions,
    rows: FileRows,
    warnings: Vec<String>,
    /// Foreign model name -> places.
    foreign: BTreeMap<String, Vec<String>>,
    /// Unknown field -> places.
    unknown: BTreeMap<String, Vec<String>>,
    /// Rows without `model_patch`, by the unknown fields they had.
    missing_patch: BTreeMap<Vec<String>, Vec<String>>,
}

impl<'a> FileScan<'a> {
    fn new(path: &Path, opts: &'a LoadOptions) -> Self {
        FileScan {
            opts,
            rows: FileRows {
                file: path.display().to_string(),
                json: false,
                readable: true,
                entries: Vec::new(),
            },
            warnings: Vec::new(),
            foreign: BTreeMap::new(),
            unknown: BTreeMap::new(),
            missing_patch: BTreeMap::new(),
        }
    }

    /// Reads the file; Err is a problem that stops the whole load.
    fn read(&mut self, path: &Path, max_line: usize) -> Result<(), String> {
        let result = self.read_any(path, max_line);
        self.rows.readable = result.is_ok();
        result
    }

    fn read_any(&mut self, path: &Path, max_line: usize) -> Result<(), String> {
        let cannot = |e: io::Error| format!("{}: cannot read: {e}", path.display());
        let mut r = BufReader::with_capacity(64 << 10, File::open(path).map_err(cannot)?);
        let is_json_ext = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let head = r.fill_buf().map_err(cannot)?;
        let head = head.strip_prefix(BOM).unwrap_or(head);
        let starts_as_list = head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
        if is_json_ext || starts_as_list {
            self.rows.json = true;
            let mut bytes = Vec::new();
            r.read_to_end(&mut bytes).map_err(cannot)?;
            return self.read_document(&bytes);
        }
        self.read_jsonl(&mut r, max_line)
    }

    fn read_jsonl(&mut self, r: &mut impl BufRead, max_line: usize) -> Result<(), String> {
        let file = self.rows.file.clone();
        let mut buf = Vec::new();
        let mut line_no = 0usize;
        loop {
            line_no += 1;
            let read = read_line_bounded(r, &mut buf, max_line)
                .map_err(|e| format!("{file}:{line_no}: cannot read: {e}"))?;
            match read {
                LineRead::Eof => return Ok(()),
                LineRead::TooLong(bytes) => self.warnings.push(format!(
                    "{file}:{line_no}: line is {bytes} bytes, above the limit of {max_line} \
                     bytes for one line; skipped (which instance it was for is unknown)"
                )),
                LineRead::Line => self.jsonl_line(&buf, line_no),
            }
            if buf.capacity() > KEEP_BUFFER_BYTES {
                buf = Vec::new();
            }
        }
    }

    fn jsonl_line(&mut self, raw: &[u8], line_no: usize) {
        let mut line = raw.strip_suffix(b"\n").unwrap_or(raw);
        line = line.strip_suffix(b"\r").unwrap_or(line);
        if line_no == 1 {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let origin = format!("{}:{line_no}", self.rows.file);
        if let Err(e) = std::str::from_utf8(line) {
            self.warnings.push(format!(
                "{origin}: not UTF-8 (invalid byte at column {}); line skipped",
                e.valid_up_to() + 1
            ));
            return;
        }
        let mut de = serde_json::Deserializer::from_slice(line);
        let seed = JsonSeed(Mode::Row {
            max_patch: self.opts.max_patch_bytes,
        });
        match seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v)) {
            Ok(v) => self.take_row(line_no.to_string(), None, v),
            Err(e) => self
                .warnings
                .push(format!("{origin}: not a JSON object ({e}); line skipped")),
        }
    }

    fn read_document(&mut self, bytes: &[u8]) -> Result<(), String> {
        let file = self.rows.file.clone();
        let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let seed = DocSeed {
            max_patch: self.opts.max_patch_bytes,
        };
        let doc = match seed.deserialize(&mut de).and_then(|d| de.end().map(|()| d)) {
            Ok(doc) => doc,
            Err(e) => {
                let hint = if e.to_string().starts_with("trailing characters") {
                    " (one object a line is JSONL: name the file .jsonl)"
                } else {
                    ""
                };
                return Err(format!(
                    "{file}:{}:{}: not valid JSON ({e}){hint}; no prediction of this file is used",
                    e.line(),
                    e.column()
                ));
            }
        };
        match doc {
            Doc::List(items) => {
                for (i, v) in items.into_iter().enumerate() {
                    self.take_row(format!("[{i}]"), None, v);
                }
            }
            Doc::Keyed(entries) => {
                let mut seen = BTreeSet::new();
                let mut twice = Vec::new();
                for (key, _) in &entries {
                    if !seen.insert(key.as_str()) && !twice.contains(key) {
                        twice.push(key.clone());
                    }
                }
                if !twice.is_empty() {
                    let keys: Vec<String> = twice.iter().map(|k| format!("{k:?}")).collect();
                    return Err(format!(
                        "{file}: key(s) {} given more than once in the object; which one \
                         is meant is ambiguous",
                        keys.join(", ")
                    ));
                }
                for (key, v) in entries {
                    match v {
                        Json::Rows(items) => {
                            for (j, v) in items.into_iter().enumerate() {
                                self.take_row(format!("{{{key}}}[{j}]"), Some(&key), v);
                            }
                        }
                        v => self.take_row(format!("{{{key}}}"), Some(&key), v),
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks one parsed row and keeps it as an [`Entry`] when it can be attributed.
    fn take_row(&mut self, loc: String, key: Option<&str>, value: Json) {
        let origin = format!("{}:{loc}", self.rows.file);
        let row = match value {
            Json::Row(row) => *row,
            other => {
                self.warnings.push(format!(
                    "{origin}: {} is not a JSON object; skipped",
                    other.describe()
                ));
                return;
            }
        };
        let mut defects = Vec::new();
        let model = match row.model {
            None | Some(Json::Null) => String::new(),
            Some(Json::Str(s)) => s,
            Some(other) => {
                defects.push(type_defect("model_name_or_path", &other, "a string"));
                String::new()
            }
        };
        if !model.is_empty() && model != self.opts.model {
            self.foreign.entry(model).or_default().push(loc);
            return;
        }
        for f in &row.unknown {
            self.unknown.entry(f.clone()).or_default().push(loc.clone());
        }
        let instance_id = match (row.instance_id, key) {
            (None | Some(Json::Null), Some(k)) => k.to_string(),
            (Some(Json::Str(id)), Some(k)) if id != k => {
                self.warnings.push(format!(
                    "{origin}: instance_id {id:?} differs from its key {k:?}; skipped"
                ));
                return;
            }
            (Some(Json::Str(id)), _) => id,
            (None | Some(Json::Null), None) => {
                self.warnings
                    .push(format!("{origin}: missing field `instance_id`; skipped"));
                return;
            }
            (Some(other), _) => {
                let d = type_defect("instance_id", &other, "a string");
                self.warnings.push(format!("{origin}: {d}; skipped"));
                return;
            }
        };
        if instance_id.trim().is_empty() {
            self.warnings
                .push(format!("{origin}: empty `instance_id`; skipped"));
            return;
        }
        let declared = match row.sample {
            None | Some(Json::Null) => Declared::No,
            Some(Json::UInt(n)) => match usize::try_from(n) {
                Ok(n) => Declared::Index(n),
                Err(_) => {
                    defects.push(type_defect("sample", &Json::UInt(n), "a sample index"));
                    Declared::Invalid
                }
            },
            Some(other) => {
                defects.push(type_defect(
                    "sample",
                    &other,
                    "a sample index (0, 1, 2, ...)",
                ));
                Declared::Invalid
            }
        };
        for name in &row.repeated {
            defects.push(format!("field `{name}` given more than once"));
        }
        let body = match row.patch {
            None => {
                self.missing_patch
                    .entry(row.unknown.clone())
                    .or_default()
                    .push(loc.clone());
                None
            }
            Some(Json::Null) => Some(PatchBody::Empty),
            Some(Json::Str(s)) if s.is_empty() => Some(PatchBody::Empty),
            Some(Json::Str(s)) => Some(PatchBody::Text(s)),
            Some(Json::TooLarge { bytes, sha256 }) => Some(PatchBody::TooLarge { bytes, sha256 }),
            Some(other) => {
                defects.push(type_defect("model_patch", &other, "a string or null"));
                None
            }
        };
        if !defects.is_empty() {
            self.warnings
                .push(format!("{origin}: {}; row skipped", defects.join("; ")));
        }
        let prediction = match body {
            Some(b) if defects.is_empty() => Some((model, b)),
            _ => None,
        };
        self.rows.entries.push(Entry {
            instance_id,
            declared,
            loc,
            origin,
            prediction,
        });
    }

    /// The file's warnings: row by row, then those gathered over the file.
    fn finish(&mut self) -> Vec<String> {
        let file = &self.rows.file;
        let json = self.rows.json;
        let mut out = std::mem::take(&mut self.warnings);
        for (name, locs) in &self.foreign {
            out.push(format!(
                "{file}: {} row(s) ({}) are for model_name_or_path {name:?}, not --model {:?}; \
                 not used (run with --model {} to evaluate them)",
                locs.len(),
                places(json, locs),
                self.opts.model,
                shell_word(name)
            ));
        }
        for (field, locs) in &self.unknown {
            out.push(format!(
                "{file}: unknown field {field:?} in {} row(s) ({}); ignored{}",
                locs.len(),
                places(json, locs),
                hint(field)
            ));
        }
        for (others, locs) in &self.missing_patch {
            let had = if others.is_empty() {
                String::new()
            } else {
                let named: Vec<String> =
                    others.iter().map(|f| format!("{f:?}{}", hint(f))).collect();
                format!(" (unknown fields there: {})", named.join(", "))
            };
            out.push(format!(
                "{file}: {} row(s) ({}) have no \"model_patch\" field{had}; skipped, not taken \
                 as empty patches (an empty patch is \"model_patch\": \"\" or null)",
                locs.len(),
                places(json, locs)
            ));
        }
        out
    }
}

fn type_defect(field: &str, found: &Json, expected: &str) -> String {
    format!(
        "field `{field}` is {}, expected {expected}",
        found.describe()
    )
}

/// " (did you mean ...?)" for a field name close to a known one.
fn hint(field: &str) -> String {
    const KNOWN: [&str; 4] = ["instance_id", "model_name_or_path", "model_patch", "sample"];
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let n = norm(field);
    let known = KNOWN
        .into_iter()
        .find(|k| norm(k) == n)
        .or(match n.as_str() {
            "patch" | "diff" | "modeldiff" | "prediction" => Some("model_patch"),
            "instance" | "id" | "taskid" => Some("instance_id"),
            "model" | "modelname" => Some("model_name_or_path"),
            _ => None,
        });
    known
        .map(|k| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default()
}

/// "lines 2, 5, 9" (JSONL) or "[0], {a}[1]" (JSON), at most [`SHOWN_PLACES`] of them.
fn places(json: bool, locs: &[String]) -> String {
    let mut s = locs
        .iter()
        .take(SHOWN_PLACES)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if locs.len() > SHOWN_PLACES {
        s.push_str(&format!(" and {} more", locs.len() - SHOWN_PLACES));
    }
    match (json, locs.len()) {
        (true, _) => s,
        (false, 1) => format!("line {s}"),
        (false, _) => format!("lines {s}"),
    }
}

/// "a and b", "a, b and c".
fn and_list(items: &[&str]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// A name as one shell word, quoted only when it has to be.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:@+-=,".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

enum LineRead {
    Eof,
    /// `buf` holds the line, with its '\n' when it had one.
    Line,
    /// The line was longer than the limit; this many bytes (without '\n') were discarded.
    TooLong(u64),
}

/// Reads one line into `buf` (cleared first), holding at most `max + 1` bytes of it: a
/// longer line is read on and discarded chunk by chunk, never held whole.
fn read_line_bounded(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<LineRead> {
    buf.clear();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let n = r.by_ref().take(limit).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(LineRead::Eof);
    }
    if buf.last() == Some(&b'\n') || buf.len() <= max {
        return Ok(LineRead::Line);
    }
    let mut bytes = buf.len() as u64;
    buf.clear();
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                bytes += i as u64;
                break;
            }
            None => {
                let len = chunk.len();
                r.consume(len);
                bytes += len as u64;
            }
        }
    }
    Ok(LineRead::TooLong(bytes))
}

// ---------------------------------------------------------------------------------------
// Sample indices

/// Resolves every row's sample index; also returns how many predictions each file gave.
fn assign_samples(
    files: &[FileRows],
    warnings: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> (BTreeMap<String, BTreeMap<usize, Prediction>>, Vec<usize>) {
    let mut out: BTreeMap<String, BTreeMap<usize, Prediction>> = BTreeMap::new();
    let mut used = vec![0usize; files.len()];
    let mut put = |fi: usize, e: &Entry, sample: usize| {
        if let Some((model, body)) = &e.prediction {
            used[fi] += 1;
            out.entry(e.instance_id.clone()).or_default().insert(
                sample,
                Prediction {
                    instance_id: e.instance_id.clone(),
                    model_name_or_path: model.clone(),
                    body: body.clone(),
                    sample,
                    origin: e.origin.clone(),
                },
            );
        }
    };
    let several = files.len() > 1;
    for (fi, f) in files.iter().enumerate() {
        let mut by_id: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
        for e in &f.entries {
            by_id.entry(&e.instance_id).or_default().push(e);
        }
        if several {
            let mut other_index = Vec::new();
            for (id, rows) in &by_id {
                if let [e] = rows.as_slice() {
                    if matches!(e.declared, Declared::Index(n) if n != fi) {
                        other_index.push(e.loc.clone());
                    }
                    put(fi, e, fi);
                } else {
                    let origins: Vec<&str> = rows.iter().map(|e| e.origin.as_str()).collect();
                    problems.push(format!(
                        "{}: instance {id:?} has {} rows in one file; with several \
                         --predictions files, each file holds one sample per instance (this \
                         one sample {fi})",
                        and_list(&origins),
                        rows.len()
                    ));
                }
            }
            if !other_index.is_empty() {
                warnings.push(format!(
                    "{}: {} row(s) ({}) give a \"sample\" other than {fi}; with several \
                     --predictions files, file order gives the index: they are sample {fi}",
                    f.file,
                    other_index.len(),
                    places(f.json, &other_index)
                ));
            }
            continue;
        }
        for (id, rows) in &by_id {
            let (with, without): (Vec<&Entry>, Vec<&Entry>) =
                rows.iter().partition(|e| e.declared != Declared::No);
            if !with.is_empty() && !without.is_empty() {
                let locs = |v: &[&Entry]| v.iter().map(|e| e.loc.clone()).collect::<Vec<_>>();
                problems.push(format!(
                    "{}: instance {id:?} gives \"sample\" on {} but not on {}; give it on \
                     every row of an instance or on none",
                    f.file,
                    places(f.json, &locs(&with)),
                    places(f.json, &locs(&without))
                ));
                continue;
            }
            let mut at: BTreeMap<usize, Vec<&Entry>> = BTreeMap::new();
            for (position, e) in rows.iter().enumerate() {
                let sample = match e.declared {
                    Declared::No => position,
                    Declared::Index(n) => n,
                    Declared::Invalid => continue,
                };
                at.entry(sample).or_default().push(e);
            }
            for (sample, rows) in at {
                if let [e] = rows.as_slice() {
                    put(fi, e, sample);
                } else {
                    let origins: Vec<&str> = rows.iter().map(|e| e.origin.as_str()).collect();
                    let times = match rows.len() {
                        2 => "twice".to_string(),
                        n => format!("{n} times"),
                    };
                    problems.push(format!(
                        "{}: instance {id:?} sample {sample} given {times}",
                        and_list(&origins)
                    ));
                }
            }
        }
    }
    (out, used)
}

// ---------------------------------------------------------------------------------------
// Parsing: a JSON value as the loader needs it, with long patches measured, not kept

/// What a row's object held. Known fields keep their value as found; types are checked
/// later so that the warning can name the field.
#[derive(Debug, Default)]
struct RawRow {
    instance_id: Option<Json>,
    model: Option<Json>,
    patch: Option<Json>,
    sample: Option<Json>,
    unknown: Vec<String>,
    repeated: Vec<&'static str>,
}

#[derive(Debug)]
enum Json {
    Null,
    Bool(bool),
    UInt(u64),
    Int(i64),
    Float(f64),
    Str(String),
    /// A string over the text limit: measured and hashed, then dropped.
    TooLarge {
        bytes: usize,
        sha256: String,
    },
    List,
    Object,
    Row(Box<RawRow>),
    /// A list of rows (the value of a key in a keyed JSON document).
    Rows(Vec<Json>),
}

impl Json {
    fn describe(&self) -> String {
        match self {
            Json::Null => "null".into(),
            Json::Bool(b) => b.to_string(),
            Json::UInt(n) => n.to_string(),
            Json::Int(n) => n.to_string(),
            Json::Float(x) => x.to_string(),
            Json::Str(s) if s.chars().count() > 40 => {
                let head: String = s.chars().take(40).collect();
                format!("the string {head:?}...")
            }
            Json::Str(s) => format!("the string {s:?}"),
            Json::TooLarge { bytes, .. } => format!("a string of {bytes} bytes"),
            Json::List | Json::Rows(_) => "a list".into(),
            Json::Object | Json::Row(_) => "an object".into(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    /// A field's value; a string longer than `max_text` becomes [`Json::TooLarge`].
    Field { max_text: Option<usize> },
    /// An object is read as a row.
    Row { max_patch: usize },
    /// An object is a row, a list is a list of rows.
    Entry { max_patch: usize },
}

struct JsonSeed(Mode);

impl<'de> DeserializeSeed<'de> for JsonSeed {
    type Value = Json;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor(self.0))
    }
}

struct JsonVisitor(Mode);

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::UInt(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(u64::try_from(v).map_or(Json::Int(v), Json::UInt))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        match self.0 {
            Mode::Field {
                max_text: Some(max),
            } if v.len() > max => Ok(Json::TooLarge {
                bytes: v.len(),
                sha256: sha256_hex(v.as_bytes()),
            }),
            _ => Ok(Json::Str(v.to_owned())),
        }
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        match self.0 {
            Mode::Field {
                max_text: Some(max),
            } if v.len() > max => self.visit_str(&v),
            _ => Ok(Json::Str(v)),
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        if let Mode::Entry { max_patch } = self.0 {
            let mut rows = Vec::new();
            while let Some(v) = seq.next_element_seed(JsonSeed(Mode::Row { max_patch }))? {
                rows.push(v);
            }
            return Ok(Json::Rows(rows));
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Json::List)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Json, A::Error> {
        match self.0 {
            Mode::Row { max_patch } | Mode::Entry { max_patch } => {
                Ok(Json::Row(Box::new(read_row(map, max_patch)?)))
            }
            Mode::Field { .. } => {
                let mut map = map;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Json::Object)
            }
        }
    }
}

fn read_row<'de, A: MapAccess<'de>>(mut map: A, max_patch: usize) -> Result<RawRow, A::Error> {
    let mut row = RawRow::default();
    while let Some(key) = map.next_key::<String>()? {
        let (name, max_text): (&'static str, Option<usize>) = match key.as_str() {
            "instance_id" => ("instance_id", None),
            "model_name_or_path" => ("model_name_or_path", None),
            "model_patch" => ("model_patch", Some(max_patch)),
            "sample" => ("sample", None),
            _ => {
                map.next_value::<IgnoredAny>()?;
                if !row.unknown.contains(&key) {
                    row.unknown.push(key);
                }
                continue;
            }
        };
        let value = map.next_value_seed(JsonSeed(Mode::Field { max_text }))?;
        let slot = match name {
            "instance_id" => &mut row.instance_id,
            "model_name_or_path" => &mut row.model,
            "model_patch" => &mut row.patch,
            _ => &mut row.sample,
        };
        if slot.is_some() {
            if !row.repeated.contains(&name) {
                row.repeated.push(name);
            }
        } else {
            *slot = Some(value);
        }
    }
    Ok(row)
}

enum Doc {
    List(Vec<Json>),
    Keyed(Vec<(String, Json)>),
}

struct DocSeed {
    max_patch: usize,
}

impl<'de> DeserializeSeed<'de> for DocSeed {
    type Value = Doc;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Doc, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DocSeed {
    type Value = Doc;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of predictions or an object keyed by instance_id")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc, A::Error> {
        let mode = Mode::Row {
            max_patch: self.max_patch,
        };
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(JsonSeed(mode))? {
            items.push(v);
        }
        Ok(Doc::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc, A::Error> {
        let mode = Mode::Entry {
            max_patch: self.max_patch,
        };
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let v = map.next_value_seed(JsonSeed(mode))?;
            entries.push((key, v));
        }
        Ok(Doc::Keyed(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn opts() -> LoadOptions {
        LoadOptions {
            model: "m".into(),
            max_patch_bytes: 1 << 20,
        }
    }

    fn texts(p: &Predictions, id: &str) -> Vec<(usize, String)> {
        p.by_instance[id]
            .iter()
            .map(|(i, p)| (*i, p.patch_text().to_string()))
            .collect()
    }

    fn err_text(r: anyhow::Result<Predictions>) -> String {
        match r {
            Ok(p) => panic!("expected an error, got {:?}", p.by_instance),
            Err(e) => format!("{e:#}"),
        }
    }

    fn any_warning(p: &Predictions, parts: &[&str]) -> bool {
        p.warnings
            .iter()
            .any(|w| parts.iter().all(|part| w.contains(part)))
    }

    // Kept from the first loader, on the new API.

    #[test]
    fn jsonl_rows_are_samples_in_order_and_bad_lines_are_named() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"model_name_or_path\":\"m\",\"model_patch\":\"one\"}\n",
                "this is not json\n",
                "\n",
                "{\"instance_id\":\"a\",\"model_name_or_path\":\"m\",\"model_patch\":null}\n",
                "{\"model_name_or_path\":\"m\",\"model_patch\":\"x\"}\n",
                "{\"instance_id\":\"b\",\"model_name_or_path\":\"m\",\"model_patch\":\"three\"}\n",
            ),
        );
        let preds = load(&[p], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "one".into()), (1, "".into())]);
        assert_eq!(preds.by_instance["a"][&1].body, PatchBody::Empty);
        assert_eq!(
            preds.by_instance["a"][&1].origin.rsplit('/').next(),
            Some("p.jsonl:4")
        );
        assert_eq!(preds.by_instance["b"].len(), 1);
        assert_eq!(preds.warnings.len(), 2, "{:?}", preds.warnings);
        assert!(preds.warnings[0].contains("p.jsonl:2: not a JSON object"));
        assert!(preds.warnings[1].contains("p.jsonl:5: missing field `instance_id`"));
    }

    #[test]
    fn json_list_and_keyed_object() {
        let d = tempfile::tempdir().unwrap();
        let l = write(
            d.path(),
            "l.json",
            "[{\"instance_id\":\"a\",\"model_patch\":\"x\"},\n 7]",
        );
        let preds = load(&[l], &opts()).unwrap();
        assert_eq!(preds.total(), 1);
        assert!(any_warning(&preds, &["l.json:[1]: 7 is not a JSON object"]));
        let o = write(
            d.path(),
            "o.json",
            concat!(
                "{\"a\": {\"model_patch\": \"x\"}, \"b\": {\"instance_id\": \"c\"},",
                " \"k\": [{\"model_patch\": \"k0\"}, {\"model_patch\": \"k1\"}]}"
            ),
        );
        let preds = load(&[o], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "x".into())]);
        assert_eq!(texts(&preds, "k"), [(0, "k0".into()), (1, "k1".into())]);
        assert!(preds.by_instance["k"][&1].origin.ends_with("o.json:{k}[1]"));
        assert!(any_warning(&preds, &["o.json:{b}", "differs from its key"]));
    }

    // 1. Bounded memory.

    #[test]
    fn a_long_line_is_discarded_in_chunks_never_held_whole() {
        let long = "x".repeat(1 << 20);
        let text = format!("{long}\nnext\r\nlast");
        let mut r = BufReader::with_capacity(4096, text.as_bytes());
        let mut buf = Vec::new();
        match read_line_bounded(&mut r, &mut buf, 1024).unwrap() {
            LineRead::TooLong(n) => assert_eq!(n, 1 << 20),
            _ => panic!("not reported as too long"),
        }
        // The buffer's capacity never shrinks, so this is the most it ever held.
        assert!(buf.capacity() < 16 << 10, "{}", buf.capacity());
        assert!(matches!(
            read_line_bounded(&mut r, &mut buf, 1024).unwrap(),
            LineRead::Line
        ));
        assert_eq!(buf, b"next\r\n");
        assert!(matches!(
            read_line_bounded(&mut r, &mut buf, 1024).unwrap(),
            LineRead::Line
        ));
        assert_eq!(buf, b"last");
        assert!(matches!(
            read_line_bounded(&mut r, &mut buf, 1024).unwrap(),
            LineRead::Eof
        ));
    }

    #[test]
    fn a_line_over_the_limit_is_skipped_with_a_warning_and_the_rest_is_read() {
        let d = tempfile::tempdir().unwrap();
        let big = "y".repeat(5000);
        let p = write(
            d.path(),
            "p.jsonl",
            &format!(
                "{{\"instance_id\":\"a\",\"model_patch\":\"s0\"}}\n\
                 {{\"instance_id\":\"b\",\"model_patch\":\"{big}\"}}\n\
                 {{\"instance_id\":\"a\",\"model_patch\":\"s1\"}}\n"
            ),
        );
        let preds = load_bounded(&[p], &opts(), 1024).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "s0".into()), (1, "s1".into())]);
        assert!(!preds.by_instance.contains_key("b"));
        assert!(
            any_warning(&preds, &["p.jsonl:2: line is 5036 bytes", "skipped"]),
            "{:?}",
            preds.warnings
        );
    }

    #[test]
    fn a_patch_over_max_patch_bytes_is_kept_as_size_and_hash() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"model_patch\":\"0123456789\"}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"012345678\\n\\u00e9\"}\n",
            ),
        );
        let o = LoadOptions {
            model: "m".into(),
            max_patch_bytes: 10,
        };
        let preds = load(&[p], &o).unwrap();
        assert_eq!(
            preds.by_instance["a"][&0].body,
            PatchBody::Text("0123456789".into())
        );
        let b = &preds.by_instance["b"][&0];
        let full = "012345678\n\u{e9}";
        assert_eq!(
            b.body,
            PatchBody::TooLarge {
                bytes: 12,
                sha256: sha256_hex(full.as_bytes())
            }
        );
        assert_eq!(b.patch_text(), "");
        assert_eq!(b.patch_sha256(), sha256_hex(full.as_bytes()));
        assert_eq!(
            preds.by_instance["a"][&0].patch_sha256(),
            sha256_hex(b"0123456789")
        );
    }

    #[test]
    fn a_json_document_also_turns_oversize_patches_into_too_large() {
        let d = tempfile::tempdir().unwrap();
        let l = write(
            d.path(),
            "l.json",
            "[{\"instance_id\":\"a\",\"model_patch\":\"0123456789ABC\"}]",
        );
        let k = write(
            d.path(),
            "k.json",
            "{\"a\": [{\"model_patch\":\"short\"}, {\"model_patch\":\"0123456789ABC\"}]}",
        );
        let o = LoadOptions {
            model: "m".into(),
            max_patch_bytes: 10,
        };
        let sha = sha256_hex(b"0123456789ABC");
        let too_large = PatchBody::TooLarge {
            bytes: 13,
            sha256: sha,
        };
        let preds = load(&[l], &o).unwrap();
        assert_eq!(preds.by_instance["a"][&0].body, too_large);
        let preds = load(&[k], &o).unwrap();
        assert_eq!(
            preds.by_instance["a"][&0].body,
            PatchBody::Text("short".into())
        );
        assert_eq!(preds.by_instance["a"][&1].body, too_large);
    }

    // 2. Non-UTF-8.

    #[test]
    fn a_non_utf8_line_is_that_lines_warning_not_the_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.jsonl");
        let mut bytes = b"{\"instance_id\":\"a\",\"model_patch\":\"s0\"}\n".to_vec();
        bytes.extend_from_slice(b"{\"instance_id\":\"a\",\"model_patch\":\"\xff\xfe\"}\n");
        bytes.extend_from_slice(b"{\"instance_id\":\"b\",\"model_patch\":\"ok\"}\n");
        std::fs::write(&p, bytes).unwrap();
        let preds = load(&[p], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "s0".into())]);
        assert_eq!(texts(&preds, "b"), [(0, "ok".into())]);
        assert_eq!(preds.warnings.len(), 1, "{:?}", preds.warnings);
        assert!(preds.warnings[0].contains("p.jsonl:2: not UTF-8 (invalid byte at column 35)"));
    }

    // 3. Other models' rows.

    #[test]
    fn other_models_rows_are_skipped_with_one_warning_per_file_and_name() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"model_name_or_path\":\"demo\",\"model_patch\":\"d0\"}\n",
                "{\"instance_id\":\"a\",\"model_name_or_path\":\"gpt-x\",\"model_patch\":\"g\"}\n",
                "{\"instance_id\":\"a\",\"model_patch\":\"d1\"}\n",
                "{\"instance_id\":\"a\",\"model_name_or_path\":\"\",\"model_patch\":\"d2\"}\n",
                "{\"instance_id\":\"b\",\"model_name_or_path\":\"gpt-x\",\"model_patch\":\"g\"}\n",
                "{\"instance_id\":\"b\",\"model_name_or_path\":\"my model\",\"model_patch\":\"g\"}\n",
                "{\"instance_id\":\"c\",\"model_name_or_path\":\"gpt-x\",\"model_patch\":\"g\"}\n",
            ),
        );
        let o = LoadOptions {
            model: "demo".into(),
            max_patch_bytes: 1 << 20,
        };
        let preds = load(&[p], &o).unwrap();
        assert_eq!(
            texts(&preds, "a"),
            [(0, "d0".into()), (1, "d1".into()), (2, "d2".into())]
        );
        assert_eq!(preds.by_instance["a"][&0].model_name_or_path, "demo");
        assert_eq!(preds.by_instance["a"][&1].model_name_or_path, "");
        assert!(!preds.by_instance.contains_key("b"));
        let foreign: Vec<&String> = preds
            .warnings
            .iter()
            .filter(|w| w.contains("are for model_name_or_path"))
            .collect();
        assert_eq!(foreign.len(), 2, "{:?}", preds.warnings);
        assert!(foreign[0].ends_with(
            "p.jsonl: 3 row(s) (lines 2, 5, 7) are for model_name_or_path \"gpt-x\", not \
             --model \"demo\"; not used (run with --model gpt-x to evaluate them)"
        ));
        assert!(foreign[1].contains("line 6) are for model_name_or_path \"my model\""));
        assert!(foreign[1].contains("--model 'my model'"));
    }

    // 4. Field names and types.

    #[test]
    fn unknown_fields_are_warned_once_per_file_and_field_with_a_hint() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"model_patch\":\"x\",\"model\":\"m\",\"cost\":1}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"x\",\"model\":\"m\"}\n",
                "{\"instance_id\":\"c\",\"model_patch\":\"x\",\"Instance_ID\":\"c\"}\n",
            ),
        );
        let preds = load(&[p], &opts()).unwrap();
        assert_eq!(preds.total(), 3);
        assert_eq!(preds.warnings.len(), 3, "{:?}", preds.warnings);
        assert!(any_warning(
            &preds,
            &[
                "unknown field \"model\" in 2 row(s) (lines 1, 2); ignored",
                "(did you mean \"model_name_or_path\"?)"
            ]
        ));
        assert!(any_warning(
            &preds,
            &["unknown field \"cost\" in 1 row(s) (line 1); ignored"]
        ));
        assert!(any_warning(
            &preds,
            &["\"Instance_ID\"", "line 3", "did you mean \"instance_id\"?"]
        ));
    }

    #[test]
    fn a_row_without_model_patch_is_skipped_never_an_empty_patch() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"patch\":\"diff\"}\n",
                "{\"instance_id\":\"b\",\"model_patch\":null}\n",
                "{\"instance_id\":\"c\",\"diff\":\"d\"}\n",
                "{\"instance_id\":\"e\",\"patch\":\"diff\"}\n",
            ),
        );
        let preds = load(&[p], &opts()).unwrap();
        assert_eq!(preds.by_instance.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(preds.by_instance["b"][&0].body, PatchBody::Empty);
        assert!(
            any_warning(
                &preds,
                &[
                    "2 row(s) (lines 1, 4) have no \"model_patch\" field",
                    "\"patch\" (did you mean \"model_patch\"?)",
                    "not taken as empty patches"
                ]
            ),
            "{:?}",
            preds.warnings
        );
        assert!(any_warning(
            &preds,
            &["(line 3) have no \"model_patch\"", "\"diff\" (did you mean"]
        ));
    }

    #[test]
    fn wrongly_typed_fields_and_non_objects_name_the_line_and_field() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"model_patch\":5}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"x\",\"sample\":-1}\n",
                "{\"instance_id\":\"c\",\"model_patch\":\"x\",\"sample\":\"x\"}\n",
                "[1, 2]\n",
                "{\"instance_id\":7,\"model_patch\":\"x\"}\n",
                "{\"instance_id\":\" \",\"model_patch\":\"x\"}\n",
                "{\"instance_id\":\"d\",\"model_patch\":\"x\",\"model_name_or_path\":[1]}\n",
                "{\"instance_id\":\"f\",\"model_patch\":\"x\",\"model_patch\":\"y\"}\n",
                "{\"instance_id\":\"ok\",\"model_patch\":\"x\"}\n",
            ),
        );
        let preds = load(&[p], &opts()).unwrap();
        assert_eq!(preds.by_instance.keys().collect::<Vec<_>>(), ["ok"]);
        let expect = [
            "p.jsonl:1: field `model_patch` is 5, expected a string or null; row skipped",
            "p.jsonl:2: field `sample` is -1, expected a sample index",
            "p.jsonl:3: field `sample` is the string \"x\", expected a sample index",
            "p.jsonl:4: a list is not a JSON object; skipped",
            "p.jsonl:5: field `instance_id` is 7, expected a string; skipped",
            "p.jsonl:6: empty `instance_id`; skipped",
            "p.jsonl:7: field `model_name_or_path` is a list, expected a string",
            "p.jsonl:8: field `model_patch` given more than once; row skipped",
        ];
        for e in expect {
            assert!(any_warning(&preds, &[e]), "{e}\n{:?}", preds.warnings);
        }
    }

    // 5. Several files.

    #[test]
    fn several_files_give_sample_order() {
        let d = tempfile::tempdir().unwrap();
        let f0 = write(
            d.path(),
            "0.jsonl",
            "{\"instance_id\":\"a\",\"model_patch\":\"s0\"}\n",
        );
        let f1 = write(
            d.path(),
            "1.jsonl",
            "{\"instance_id\":\"a\",\"model_patch\":\"s1\"}\n",
        );
        let preds = load(&[f1.clone(), f0.clone()], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "s1".into()), (1, "s0".into())]);
        let preds = load(&[f0, f1], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "s0".into()), (1, "s1".into())]);
    }

    #[test]
    fn several_files_an_instance_missing_from_a_file_is_a_gap() {
        let d = tempfile::tempdir().unwrap();
        let f0 = write(
            d.path(),
            "0.jsonl",
            "{\"instance_id\":\"a\",\"model_patch\":\"a0\"}\n",
        );
        let f1 = write(
            d.path(),
            "1.jsonl",
            "{\"instance_id\":\"b\",\"model_patch\":\"b1\"}\n",
        );
        let f2 = write(
            d.path(),
            "2.jsonl",
            "{\"instance_id\":\"a\",\"model_patch\":\"a2\"}\n",
        );
        let preds = load(&[f0, f1, f2], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "a0".into()), (2, "a2".into())]);
        assert_eq!(texts(&preds, "b"), [(1, "b1".into())]);
    }

    #[test]
    fn several_files_two_rows_of_an_instance_in_one_file_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let f0 = write(
            d.path(),
            "0.jsonl",
            "{\"instance_id\":\"a\",\"model_patch\":\"a0\"}\n",
        );
        let f1 = write(
            d.path(),
            "1.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"model_patch\":\"a1\"}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"b1\"}\n",
                "{\"instance_id\":\"a\",\"model_patch\":\"again\"}\n",
            ),
        );
        let e = err_text(load(&[f0, f1], &opts()));
        assert!(e.contains("1.jsonl:1 and "), "{e}");
        assert!(
            e.contains("1.jsonl:3: instance \"a\" has 2 rows in one file"),
            "{e}"
        );
    }

    #[test]
    fn several_files_a_row_declaring_another_sample_warns_and_file_order_wins() {
        let d = tempfile::tempdir().unwrap();
        let f0 = write(
            d.path(),
            "0.jsonl",
            "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"a0\"}\n",
        );
        let f1 = write(
            d.path(),
            "1.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"a1\"}\n",
                "{\"instance_id\":\"b\",\"sample\":1,\"model_patch\":\"b1\"}\n",
                "{\"instance_id\":\"c\",\"sample\":3,\"model_patch\":\"c1\"}\n",
            ),
        );
        let preds = load(&[f0, f1], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "a0".into()), (1, "a1".into())]);
        assert_eq!(texts(&preds, "c"), [(1, "c1".into())]);
        assert_eq!(preds.warnings.len(), 1, "{:?}", preds.warnings);
        assert!(
            preds.warnings[0]
                .contains("1.jsonl: 2 row(s) (lines 1, 3) give a \"sample\" other than 1")
        );
    }

    // 6. One file.

    #[test]
    fn one_file_declared_samples_give_the_index_gaps_allowed() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"sample\":3,\"model_patch\":\"s3\"}\n",
                "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"s0\"}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"b0\"}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"b1\"}\n",
            ),
        );
        let preds = load(&[p], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "s0".into()), (3, "s3".into())]);
        assert_eq!(preds.by_instance["a"][&3].sample, 3);
        assert_eq!(texts(&preds, "b"), [(0, "b0".into()), (1, "b1".into())]);
        assert!(preds.warnings.is_empty(), "{:?}", preds.warnings);
    }

    #[test]
    fn one_file_the_same_sample_twice_is_an_error_naming_both_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"x\",\"sample\":0,\"model_patch\":\"s0\"}\n",
                "{\"instance_id\":\"x\",\"sample\":2,\"model_patch\":\"s2\"}\n",
                "{\"instance_id\":\"x\",\"sample\":1,\"model_patch\":\"s1\"}\n",
                "{\"instance_id\":\"y\",\"sample\":0,\"model_patch\":\"y\"}\n",
                "\n",
                "\n",
                "{\"instance_id\":\"x\",\"sample\":1,\"model_patch\":\"dup\"}\n",
            ),
        );
        let e = err_text(load(std::slice::from_ref(&p), &opts()));
        let f = p.display().to_string();
        assert!(
            e.contains(&format!(
                "{f}:3 and {f}:7: instance \"x\" sample 1 given twice"
            )),
            "{e}"
        );
    }

    #[test]
    fn one_file_mixed_sample_declarations_are_an_error_naming_the_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"sample\":1,\"model_patch\":\"s1\"}\n",
                "{\"instance_id\":\"a\",\"model_patch\":\"what\"}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"b0\"}\n",
                "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"s0\"}\n",
            ),
        );
        let e = err_text(load(&[p], &opts()));
        assert!(
            e.contains("p.jsonl: instance \"a\" gives \"sample\" on lines 1, 4 but not on line 2"),
            "{e}"
        );
    }

    #[test]
    fn one_file_a_defective_row_keeps_its_place_so_later_rows_do_not_move_up() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"model_patch\":\"s0\"}\n",
                "{\"instance_id\":\"a\",\"model_patch\":5}\n",
                "{\"instance_id\":\"a\",\"model_patch\":\"s2\"}\n",
                "{\"instance_id\":\"a\",\"model_name_or_path\":\"other\",\"model_patch\":\"o\"}\n",
                "{\"instance_id\":\"a\",\"model_patch\":\"s3\"}\n",
            ),
        );
        let preds = load(&[p], &opts()).unwrap();
        assert_eq!(
            texts(&preds, "a"),
            [(0, "s0".into()), (2, "s2".into()), (3, "s3".into())]
        );
    }

    // 7. All problems at once.

    #[test]
    fn every_problem_of_every_file_comes_in_one_error() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"model_patch\":\"1\"}\n",
                "{\"instance_id\":\"a\",\"model_patch\":\"2\"}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"1\"}\n",
                "{\"instance_id\":\"b\",\"model_patch\":\"2\"}\n",
            ),
        );
        let bad = write(d.path(), "bad.json", "[{\"instance_id\": \"a\",\n oops]");
        let missing = d.path().join("missing.jsonl");
        let e = err_text(load(&[p, bad, missing], &opts()));
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(lines.len(), 5, "{e}");
        assert!(lines[0].contains("(4 problem(s))"), "{e}");
        assert!(e.contains("bad.json:2:"), "{e}");
        assert!(e.contains("missing.jsonl: cannot read"), "{e}");
        assert!(e.contains("p.jsonl:2: instance \"a\" has 2 rows"), "{e}");
        assert!(e.contains("p.jsonl:4: instance \"b\" has 2 rows"), "{e}");
    }

    #[test]
    fn a_json_list_in_a_jsonl_file_and_a_bom_are_read() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            "\u{feff}\n  [{\"instance_id\":\"a\",\"model_patch\":\"x\"}]",
        );
        let preds = load(&[p], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "x".into())]);
        let q = write(
            d.path(),
            "q.jsonl",
            "\u{feff}{\"instance_id\":\"a\",\"model_patch\":\"x\"}\r\n",
        );
        let preds = load(&[q], &opts()).unwrap();
        assert_eq!(texts(&preds, "a"), [(0, "x".into())]);
        assert!(preds.warnings.is_empty(), "{:?}", preds.warnings);
    }

    #[test]
    fn a_jsonl_file_named_json_and_repeated_keys_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.json",
            "{\"instance_id\":\"a\",\"model_patch\":\"x\"}\n{\"instance_id\":\"b\",\"model_patch\":\"y\"}\n",
        );
        let e = err_text(load(&[p], &opts()));
        assert!(e.contains("name the file .jsonl"), "{e}");
        let k = write(
            d.path(),
            "k.json",
            "{\"a\": {\"model_patch\":\"x\"}, \"a\": {\"model_patch\":\"y\"}}",
        );
        let e = err_text(load(&[k], &opts()));
        assert!(
            e.contains("k.json: key(s) \"a\" given more than once"),
            "{e}"
        );
        let s = write(d.path(), "s.json", "5");
        let e = err_text(load(&[s], &opts()));
        assert!(e.contains("expected a list of predictions or an object keyed by instance_id"));
    }

    #[test]
    fn the_example_predictions_load_cleanly() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/_predictions/demo-agent.jsonl");
        let o = LoadOptions {
            model: "demo-agent".into(),
            max_patch_bytes: crate::patch::MAX_PATCH_BYTES,
        };
        let preds = load(&[p], &o).unwrap();
        assert!(preds.warnings.is_empty(), "{:?}", preds.warnings);
        assert!(preds.total() > 0);
    }
}
