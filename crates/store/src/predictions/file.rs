//! Reading one predictions file, a line or a document at a time.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use super::json::*;
use super::*;
use serde::de::DeserializeSeed;

// ---------------------------------------------------------------------------------------
// Reading one file

/// A row attributable to an instance of this model; `prediction` is None for a defective
/// row (already warned about), which still holds its place among the instance's samples
/// so that a later row does not take a defective one's place.
pub(super) struct Entry {
    pub(super) instance_id: String,
    pub(super) declared: Declared,
    pub(super) loc: String,
    pub(super) origin: String,
    pub(super) prediction: Option<(String, PatchBody)>,
    pub(super) agent: Option<harness_core::spend::AgentSpend>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Declared {
    /// No `sample` field (or null).
    No,
    Index(usize),
    /// A `sample` field that is not an index (warned about).
    Invalid,
}

pub(super) struct FileRows {
    pub(super) file: String,
    /// JSON document (places are `[i]`/`{id}`) rather than JSONL (places are line numbers).
    pub(super) json: bool,
    pub(super) readable: bool,
    pub(super) entries: Vec<Entry>,
}

pub(super) struct FileScan<'a> {
    pub(super) opts: &'a LoadOptions,
    pub(super) rows: FileRows,
    pub(super) warnings: Vec<String>,
    /// Foreign model name -> places.
    pub(super) foreign: BTreeMap<String, Vec<String>>,
    /// With `rollout_per_file`: the model the file's first named row gives.
    pub(super) rollout: Option<String>,
    /// Unknown field -> places.
    pub(super) unknown: BTreeMap<String, Vec<String>>,
    /// Rows without `model_patch`, by the unknown fields they had.
    pub(super) missing_patch: BTreeMap<Vec<String>, Vec<String>>,
}

impl<'a> FileScan<'a> {
    pub(super) fn new(path: &Path, opts: &'a LoadOptions) -> Self {
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
            rollout: None,
            unknown: BTreeMap::new(),
            missing_patch: BTreeMap::new(),
        }
    }

    /// Reads the file; Err is a problem that stops the whole load.
    pub(super) fn read(&mut self, path: &Path, max_line: usize) -> Result<(), String> {
        let result = self.read_any(path, max_line);
        self.rows.readable = result.is_ok();
        result
    }

    pub(super) fn read_any(&mut self, path: &Path, max_line: usize) -> Result<(), String> {
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

    pub(super) fn read_jsonl(
        &mut self,
        r: &mut impl BufRead,
        max_line: usize,
    ) -> Result<(), String> {
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

    pub(super) fn jsonl_line(&mut self, raw: &[u8], line_no: usize) {
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

    pub(super) fn read_document(&mut self, bytes: &[u8]) -> Result<(), String> {
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
    pub(super) fn take_row(&mut self, loc: String, key: Option<&str>, value: Json) {
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
        let wanted = if self.opts.rollout_per_file {
            if self.rollout.is_none() && !model.is_empty() {
                self.rollout = Some(model.clone());
            }
            self.rollout.clone().unwrap_or_default()
        } else {
            self.opts.model.clone()
        };
        if !model.is_empty() && !wanted.is_empty() && model != wanted {
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
        let agent = agent_spend(row.agent_usage, row.agent_seconds)
            .map_err(|e| {
                self.warnings
                    .push(format!("{origin}: {e}; what the agent spent is not shown"))
            })
            .ok()
            .flatten();
        self.rows.entries.push(Entry {
            instance_id,
            declared,
            loc,
            origin,
            prediction,
            agent,
        });
    }

    /// The file's warnings: row by row, then those gathered over the file.
    pub(super) fn finish(&mut self) -> Vec<String> {
        let file = &self.rows.file;
        let json = self.rows.json;
        let mut out = std::mem::take(&mut self.warnings);
        for (name, locs) in &self.foreign {
            if let Some(rollout) = &self.rollout {
                out.push(format!(
                    "{file}: {} row(s) ({}) are for model_name_or_path {name:?}, not this \
                     file's rollout {rollout:?} (its first row); not used: one file, one rollout",
                    locs.len(),
                    places(json, locs),
                ));
                continue;
            }
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

pub(super) fn type_defect(field: &str, found: &Json, expected: &str) -> String {
    format!(
        "field `{field}` is {}, expected {expected}",
        found.describe()
    )
}

/// " (did you mean ...?)" for a field name close to a known one.
pub(super) fn hint(field: &str) -> String {
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
pub(super) fn places(json: bool, locs: &[String]) -> String {
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
pub(super) fn and_list(items: &[&str]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// A name as one shell word, quoted only when it has to be.
pub(super) fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:@+-=,".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

pub(super) enum LineRead {
    Eof,
    /// `buf` holds the line, with its '\n' when it had one.
    Line,
    /// The line was longer than the limit; this many bytes (without '\n') were discarded.
    TooLong(u64),
}

/// Reads one line into `buf` (cleared first), holding at most `max + 1` bytes of it: a
/// longer line is read on and discarded chunk by chunk, never held whole.
pub(super) fn read_line_bounded(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<LineRead> {
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

/// What a row says its agent spent (`agent_usage`, `agent_seconds`), when it says.
fn agent_spend(
    usage: Option<serde_json::Value>,
    seconds: Option<serde_json::Value>,
) -> Result<Option<harness_core::spend::AgentSpend>, String> {
    let Some(usage) = usage.filter(|u| !u.is_null()) else {
        return Ok(None);
    };
    let usage: harness_core::spend::Usage =
        serde_json::from_value(usage).map_err(|e| format!("`agent_usage`: {e}"))?;
    if let Some(c) = usage.cost_usd
        && !(c.is_finite() && c >= 0.0)
    {
        return Err(format!(
            "`agent_usage.cost_usd`: {c} is not a number of dollars"
        ));
    }
    let seconds = match seconds {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(s) if s.is_finite() && s >= 0.0 => Some(s),
            _ => return Err(format!("`agent_seconds`: {v} is not a number of seconds")),
        },
    };
    Ok(Some(harness_core::spend::AgentSpend { usage, seconds }))
}
