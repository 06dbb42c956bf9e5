//! Predictions: JSONL or JSON files of agent patches, grouped into samples per instance.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One submitted patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    pub instance_id: String,
    pub model_name_or_path: String,
    /// The unified diff; `None` when the field was null or missing.
    pub model_patch: Option<String>,
    /// The `sample` field, when the row had one.
    pub declared_sample: Option<u64>,
    /// "file:line" (JSONL) or "file:[i]" / "file:{id}" (JSON) — where it came from.
    pub origin: String,
    file_index: usize,
    row: usize,
}

impl Prediction {
    /// The patch text, empty for a null patch.
    pub fn patch_text(&self) -> &str {
        self.model_patch.as_deref().unwrap_or("")
    }
}

#[derive(Debug, Deserialize)]
struct Row {
    instance_id: Option<String>,
    #[serde(default)]
    model_name_or_path: Option<String>,
    #[serde(default)]
    model_patch: Option<String>,
    #[serde(default)]
    sample: Option<u64>,
}

/// All predictions, by instance, each instance's samples in order (sample 0 first).
#[derive(Debug, Default)]
pub struct Predictions {
    pub by_instance: BTreeMap<String, Vec<Prediction>>,
    /// Problems that did not stop loading: malformed lines, duplicates, ... each naming where.
    pub warnings: Vec<String>,
    /// Distinct `model_name_or_path` values seen.
    pub model_names: Vec<String>,
}

impl Predictions {
    /// Loads one or more files. With several files, file order gives the sample index; in one
    /// file, repeated rows of an instance are its samples in order. When every row of an
    /// instance carries `sample`, that field gives the order instead. Bad rows are reported
    /// in `warnings` and skipped; the rest still count.
    pub fn load(paths: &[PathBuf]) -> Predictions {
        let mut all = Vec::new();
        let mut warnings = Vec::new();
        for (fi, p) in paths.iter().enumerate() {
            match std::fs::read_to_string(p) {
                Ok(text) => parse_file(p, fi, &text, &mut all, &mut warnings),
                Err(e) => warnings.push(format!("{}: cannot read: {e}", p.display())),
            }
        }
        let mut model_names: Vec<String> = Vec::new();
        let mut by_instance: BTreeMap<String, Vec<Prediction>> = BTreeMap::new();
        for p in all {
            if !model_names.contains(&p.model_name_or_path) {
                model_names.push(p.model_name_or_path.clone());
            }
            by_instance
                .entry(p.instance_id.clone())
                .or_default()
                .push(p);
        }
        for (id, preds) in by_instance.iter_mut() {
            if preds.iter().all(|p| p.declared_sample.is_some()) {
                preds.sort_by_key(|p| (p.declared_sample, p.file_index, p.row));
                let mut seen = std::collections::BTreeSet::new();
                preds.retain(|p| {
                    let fresh = seen.insert(p.declared_sample);
                    if !fresh {
                        warnings.push(format!(
                            "{}: instance {id}: sample {} given twice; this row is ignored",
                            p.origin,
                            p.declared_sample.unwrap_or_default()
                        ));
                    }
                    fresh
                });
            } else {
                preds.sort_by_key(|p| (p.file_index, p.row));
            }
        }
        Predictions {
            by_instance,
            warnings,
            model_names,
        }
    }

    pub fn total(&self) -> usize {
        self.by_instance.values().map(Vec::len).sum()
    }
}

fn parse_file(
    path: &Path,
    file_index: usize,
    text: &str,
    out: &mut Vec<Prediction>,
    warnings: &mut Vec<String>,
) {
    let file = path.display().to_string();
    let trimmed = text.trim_start();
    let is_json_doc = path.extension().is_some_and(|e| e == "json") || trimmed.starts_with('[');
    if is_json_doc {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Array(items)) => {
                for (i, v) in items.into_iter().enumerate() {
                    let origin = format!("{file}:[{i}]");
                    push_row(v, None, &origin, file_index, i, out, warnings);
                }
            }
            Ok(serde_json::Value::Object(map)) => {
                for (i, (key, v)) in map.into_iter().enumerate() {
                    let origin = format!("{file}:{{{key}}}");
                    match v {
                        serde_json::Value::Array(items) => {
                            for (j, v) in items.into_iter().enumerate() {
                                let origin = format!("{origin}[{j}]");
                                push_row(
                                    v,
                                    Some(&key),
                                    &origin,
                                    file_index,
                                    i * 10_000 + j,
                                    out,
                                    warnings,
                                );
                            }
                        }
                        v => push_row(
                            v,
                            Some(&key),
                            &origin,
                            file_index,
                            i * 10_000,
                            out,
                            warnings,
                        ),
                    }
                }
            }
            Ok(_) => warnings.push(format!(
                "{file}: a JSON predictions file must be a list or an object keyed by instance_id"
            )),
            Err(e) => warnings.push(format!(
                "{file}:{}:{}: not valid JSON ({e}); no prediction of this file is used",
                e.line(),
                e.column()
            )),
        }
        return;
    }
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let origin = format!("{file}:{}", i + 1);
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v) => push_row(v, None, &origin, file_index, i, out, warnings),
            Err(e) => warnings.push(format!("{origin}: not a JSON object ({e}); line skipped")),
        }
    }
}

fn push_row(
    value: serde_json::Value,
    key: Option<&str>,
    origin: &str,
    file_index: usize,
    row: usize,
    out: &mut Vec<Prediction>,
    warnings: &mut Vec<String>,
) {
    if !value.is_object() {
        warnings.push(format!("{origin}: not a JSON object; skipped"));
        return;
    }
    let r: Row = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => {
            warnings.push(format!("{origin}: {e}; skipped"));
            return;
        }
    };
    let instance_id = match (r.instance_id, key) {
        (Some(id), Some(k)) if id != k => {
            warnings.push(format!(
                "{origin}: instance_id {id:?} differs from its key {k:?}; skipped"
            ));
            return;
        }
        (Some(id), _) => id,
        (None, Some(k)) => k.to_string(),
        (None, None) => {
            warnings.push(format!("{origin}: missing field `instance_id`; skipped"));
            return;
        }
    };
    if instance_id.trim().is_empty() {
        warnings.push(format!("{origin}: empty `instance_id`; skipped"));
        return;
    }
    out.push(Prediction {
        instance_id,
        model_name_or_path: r.model_name_or_path.unwrap_or_default(),
        model_patch: r.model_patch,
        declared_sample: r.sample,
        origin: origin.to_string(),
        file_index,
        row,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

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
        let preds = Predictions::load(&[p]);
        assert_eq!(preds.by_instance["a"].len(), 2);
        assert_eq!(preds.by_instance["a"][0].patch_text(), "one");
        assert_eq!(preds.by_instance["a"][1].model_patch, None);
        assert_eq!(preds.by_instance["b"].len(), 1);
        assert_eq!(preds.warnings.len(), 2, "{:?}", preds.warnings);
        assert!(
            preds.warnings[0].contains("p.jsonl:2: not a JSON object"),
            "{:?}",
            preds.warnings
        );
        assert!(preds.warnings[1].contains("p.jsonl:5: missing field `instance_id`"));
    }

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
        let preds = Predictions::load(&[f1.clone(), f0.clone()]);
        assert_eq!(preds.by_instance["a"][0].patch_text(), "s1");
        let preds = Predictions::load(&[f0, f1]);
        assert_eq!(preds.by_instance["a"][0].patch_text(), "s0");
    }

    #[test]
    fn declared_sample_orders_and_duplicates_warn() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "p.jsonl",
            concat!(
                "{\"instance_id\":\"a\",\"sample\":1,\"model_patch\":\"s1\"}\n",
                "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"s0\"}\n",
                "{\"instance_id\":\"a\",\"sample\":0,\"model_patch\":\"dup\"}\n",
            ),
        );
        let preds = Predictions::load(&[p]);
        let a = &preds.by_instance["a"];
        assert_eq!(
            a.iter().map(|p| p.patch_text()).collect::<Vec<_>>(),
            ["s0", "s1"]
        );
        assert!(
            preds.warnings[0].contains("p.jsonl:3"),
            "{:?}",
            preds.warnings
        );
    }

    #[test]
    fn json_list_and_keyed_object() {
        let d = tempfile::tempdir().unwrap();
        let l = write(
            d.path(),
            "l.json",
            "[{\"instance_id\":\"a\",\"model_patch\":\"x\"},\n 7]",
        );
        let preds = Predictions::load(&[l]);
        assert_eq!(preds.total(), 1);
        assert!(preds.warnings[0].contains("l.json:[1]"));
        let o = write(
            d.path(),
            "o.json",
            "{\"a\": {\"model_patch\": \"x\"}, \"b\": {\"instance_id\": \"c\"}}",
        );
        let preds = Predictions::load(&[o]);
        assert_eq!(preds.by_instance["a"][0].patch_text(), "x");
        assert!(preds.warnings[0].contains("differs from its key"));
        let bad = write(d.path(), "bad.json", "[{\"instance_id\": \"a\",\n oops]");
        let preds = Predictions::load(&[bad]);
        assert!(
            preds.warnings[0].contains("bad.json:2:"),
            "{:?}",
            preds.warnings
        );
    }
}
