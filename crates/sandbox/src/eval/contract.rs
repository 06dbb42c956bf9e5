//! The contract of the in-container timer's result line, defined once in
//! `container/programs/timer_result.schema.json` (embedded here, uploaded beside the timer):
//! the line's prefix, and every field of the timer's result with its JSON type and whether it
//! must be there. The timer checks each result against it before printing
//! (`container/programs/timer_contract.py`); the harness checks each line against it before
//! reading ([`check`]): a field the schema does not list, a required one missing or one of
//! another type is an error naming the field, never a default.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The schema's text, as the containers get it.
pub const SCHEMA_TEXT: &str =
    include_str!("../../../../container/programs/timer_result.schema.json");

const TYPES: [&str; 7] = [
    "integer", "number", "string", "boolean", "null", "array", "object",
];

/// The schema, read once (a schema that does not read is a build of the harness gone wrong:
/// a unit test reads it).
pub static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
    let schema: Schema = serde_json::from_str(SCHEMA_TEXT)
        .unwrap_or_else(|e| panic!("timer_result.schema.json does not read: {e}"));
    if let Err(e) = schema.well_formed() {
        panic!("timer_result.schema.json: {e}");
    }
    schema
});

/// Every harness result line's prefix (the timer's and the guard's): `PREFIX:NONCE JSON`.
pub static RESULT_PREFIX: LazyLock<String> = LazyLock::new(|| format!("{}:", SCHEMA.prefix));

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    #[serde(rename = "description", default)]
    _description: Option<String>,
    pub prefix: String,
    /// The result's fields, by name.
    pub fields: BTreeMap<String, Field>,
}

/// One field (or an array's elements, or a map's values).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    #[serde(rename = "type", deserialize_with = "one_or_many")]
    pub types: Vec<String>,
    /// Whether the key must be there (said for every field of a record; none for an array's
    /// elements or a map's values).
    #[serde(default)]
    pub required: Option<bool>,
    #[serde(rename = "description", default)]
    _description: Option<String>,
    /// An array's elements.
    #[serde(default)]
    pub items: Option<Box<Field>>,
    /// An array's exact length.
    #[serde(default)]
    pub length: Option<usize>,
    /// An object's own fields: a record, no other key.
    #[serde(default)]
    pub fields: Option<BTreeMap<String, Field>>,
    /// An object's values: a map.
    #[serde(default)]
    pub values: Option<Box<Field>>,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(t) => vec![t],
        OneOrMany::Many(ts) => ts,
    })
}

impl Schema {
    /// Every type known, `required` said for every field of a record.
    fn well_formed(&self) -> Result<(), String> {
        fn record(fields: &BTreeMap<String, Field>, at: &str) -> Result<(), String> {
            for (name, f) in fields {
                if f.required.is_none() {
                    return Err(format!(
                        "field \"{at}{name}\" does not say whether it is required"
                    ));
                }
                field(f, &format!("{at}{name}"))?;
            }
            Ok(())
        }
        fn field(f: &Field, path: &str) -> Result<(), String> {
            if f.types.is_empty() {
                return Err(format!("field \"{path}\" has no type"));
            }
            if let Some(t) = f.types.iter().find(|t| !TYPES.contains(&t.as_str())) {
                return Err(format!("field \"{path}\": unknown type {t:?}"));
            }
            if let Some(items) = &f.items {
                field(items, &format!("{path}[]"))?;
            }
            if let Some(values) = &f.values {
                field(values, &format!("{path}.*"))?;
            }
            match &f.fields {
                Some(fields) => record(fields, &format!("{path}.")),
                None => Ok(()),
            }
        }
        if self.prefix.is_empty() || self.prefix.contains(char::is_whitespace) {
            return Err(format!("prefix {:?}: not a word", self.prefix));
        }
        record(&self.fields, "")
    }
}

/// A JSON value's type as the schema names it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check_value(value: &Value, spec: &Field, path: &str, problems: &mut Vec<String>) {
    let name = type_name(value);
    let fits = |t: &str| spec.types.iter().any(|x| x == t);
    if !(fits(name) || name == "integer" && fits("number")) {
        problems.push(format!(
            "field \"{path}\": expected {}, got {name}",
            spec.types.join(" or ")
        ));
        return;
    }
    match value {
        Value::Array(items) => {
            if let Some(n) = spec.length.filter(|n| *n != items.len()) {
                problems.push(format!(
                    "field \"{path}\": expected {n} elements, got {}",
                    items.len()
                ));
            }
            if let Some(each) = &spec.items {
                for (i, item) in items.iter().enumerate() {
                    check_value(item, each, &format!("{path}[{i}]"), problems);
                }
            }
        }
        Value::Object(map) => {
            if let Some(fields) = &spec.fields {
                check_record(map, fields, &format!("{path}."), problems);
            } else if let Some(each) = &spec.values {
                for (key, item) in map {
                    check_value(item, each, &format!("{path}.{key}"), problems);
                }
            }
        }
        _ => {}
    }
}

fn check_record(
    record: &Map<String, Value>,
    fields: &BTreeMap<String, Field>,
    at: &str,
    problems: &mut Vec<String>,
) {
    for name in record.keys().filter(|k| !fields.contains_key(*k)) {
        problems.push(format!("field \"{at}{name}\": not in the schema"));
    }
    for (name, spec) in fields {
        match record.get(name) {
            Some(value) => check_value(value, spec, &format!("{at}{name}"), problems),
            None if spec.required == Some(true) => {
                problems.push(format!("field \"{at}{name}\": missing"))
            }
            None => {}
        }
    }
}

/// The timer's result checked against the schema: each field it has listed there and of its
/// type, every required one there. The error names the fields (the first five).
pub fn check(result: &Value) -> Result<(), String> {
    let mut problems = Vec::new();
    match result {
        Value::Object(map) => check_record(map, &SCHEMA.fields, "", &mut problems),
        other => problems.push(format!("not an object but {}", type_name(other))),
    }
    match problems.len() {
        0 => Ok(()),
        n => Err(format!(
            "{}{}",
            problems[..n.min(5)].join("; "),
            if n > 5 {
                format!("; and {} more", n - 5)
            } else {
                String::new()
            }
        )),
    }
}

/// `result` with every string it holds, and every key of a map, passed through `redact`; the
/// names of the schema's own fields are kept (they are the protocol, not data: a secret
/// that holds a piece of one must not unmake the line). Run after [`check`].
pub fn redact_values(result: &mut Value, redact: &dyn Fn(&str) -> String) {
    if let Value::Object(map) = result {
        redact_record(map, &SCHEMA.fields, redact);
    }
}

fn redact_record(
    map: &mut Map<String, Value>,
    fields: &BTreeMap<String, Field>,
    redact: &dyn Fn(&str) -> String,
) {
    for (name, value) in map.iter_mut() {
        match fields.get(name) {
            Some(spec) => redact_value(value, Some(spec), redact),
            None => redact_value(value, None, redact),
        }
    }
}

fn redact_value(value: &mut Value, spec: Option<&Field>, redact: &dyn Fn(&str) -> String) {
    match value {
        Value::String(s) => *s = redact(s),
        Value::Array(items) => {
            let inner = spec.and_then(|f| f.items.as_deref());
            for item in items {
                redact_value(item, inner, redact);
            }
        }
        Value::Object(map) => match spec.and_then(|f| f.fields.as_ref()) {
            Some(fields) => redact_record(map, fields, redact),
            // A map (or anything the schema does not name): its keys are data too.
            None => {
                let inner = spec.and_then(|f| f.values.as_deref());
                let taken = std::mem::take(map);
                for (k, mut v) in taken {
                    redact_value(&mut v, inner, redact);
                    map.insert(redact(&k), v);
                }
            }
        },
        _ => {}
    }
}

/// A result with every field said and no value in any: null where the type allows it, else
/// zero, false, an empty string, list or object (what the timer's `blank()` makes).
#[cfg(test)]
pub fn blank() -> Value {
    let mut out = Map::new();
    for (name, spec) in &SCHEMA.fields {
        let empty = if spec.types.iter().any(|t| t == "null") {
            Value::Null
        } else {
            match spec.types[0].as_str() {
                "integer" => Value::from(0),
                "number" => Value::from(0.0),
                "string" => Value::from(""),
                "boolean" => Value::from(false),
                "array" => Value::Array(Vec::new()),
                _ => Value::Object(Map::new()),
            }
        };
        out.insert(name.clone(), empty);
    }
    Value::Object(out)
}

/// A result with a value in every field, the optional ones too, each array one element long
/// (or its length) and each map one entry: what a reader must take whole.
#[cfg(test)]
pub fn sample() -> Value {
    fn of(spec: &Field) -> Value {
        match spec.types.iter().find(|t| *t != "null").map(String::as_str) {
            Some("integer") => Value::from(1),
            Some("number") => Value::from(1.5),
            Some("string") => Value::from("s"),
            Some("boolean") => Value::from(true),
            Some("array") => Value::Array(match &spec.items {
                Some(each) => (0..spec.length.unwrap_or(1)).map(|_| of(each)).collect(),
                None => Vec::new(),
            }),
            _ => match (&spec.fields, &spec.values) {
                (Some(fields), _) => record(fields),
                (None, Some(each)) => Value::Object(Map::from_iter([("k".into(), of(each))])),
                (None, None) => Value::Object(Map::new()),
            },
        }
    }
    fn record(fields: &BTreeMap<String, Field>) -> Value {
        Value::Object(fields.iter().map(|(k, f)| (k.clone(), of(f))).collect())
    }
    record(&SCHEMA.fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_reads_and_is_the_uploaded_file() {
        assert_eq!(SCHEMA.prefix, "HARNESS_RESULT");
        assert_eq!(*RESULT_PREFIX, "HARNESS_RESULT:");
        let uploaded = crate::assets::ASSETS
            .iter()
            .find(|a| a.path == "opt/harness/timer_result.schema.json")
            .expect("the schema is uploaded beside the timer");
        assert_eq!(uploaded.bytes, SCHEMA_TEXT.as_bytes());
        assert_eq!(check(&blank()), Ok(()));
        assert_eq!(check(&sample()), Ok(()));
    }

    #[test]
    fn each_breach_names_its_field() {
        let with = |edit: &dyn Fn(&mut Map<String, Value>)| {
            let mut v = blank();
            edit(v.as_object_mut().unwrap());
            check(&v).unwrap_err()
        };
        let e = with(&|m| {
            m.insert("wall_seconds".into(), Value::from(1.5));
        });
        assert_eq!(e, "field \"wall_seconds\": not in the schema");
        let e = with(&|m| {
            m.remove("wall_ns");
        });
        assert_eq!(e, "field \"wall_ns\": missing");
        let e = with(&|m| {
            m.insert("user_s".into(), Value::from("1.5"));
        });
        assert_eq!(e, "field \"user_s\": expected number, got string");
        let e = with(&|m| {
            m.insert("wall_ns".into(), Value::from(1.5));
        });
        assert_eq!(e, "field \"wall_ns\": expected integer, got number");
        let e = with(&|m| {
            m.insert("throttled".into(), Value::from(true));
        });
        assert_eq!(
            e,
            "field \"throttled\": expected integer or null, got boolean"
        );
        // Nested: an array's length and elements, a record's fields, a map's values.
        let e = with(&|m| {
            m.insert("cpu_probe_ms".into(), serde_json::json!([1.0]));
        });
        assert_eq!(e, "field \"cpu_probe_ms\": expected 2 elements, got 1");
        let e = with(&|m| {
            m.insert(
                "reps".into(),
                serde_json::json!([{"wall_ns": 1, "user_s": 0, "sys_s": 0, "metric": null,
                                    "output_digest": "sha256:x", "extra": 1}]),
            );
        });
        assert_eq!(e, "field \"reps[0].extra\": not in the schema");
        let e = with(&|m| {
            m.insert("metric".into(), serde_json::json!({"value": "7"}));
        });
        assert_eq!(
            e,
            "field \"metric.printed\": missing; field \"metric.value\": expected number or null, got string"
        );
        let e = with(&|m| {
            m.insert("changes".into(), serde_json::json!({"a.py": 3}));
        });
        assert_eq!(e, "field \"changes.a.py\": expected string, got integer");
        // A simulator's record has optional fields; an unknown one is still refused.
        let mut v = blank();
        v["simulated"] = serde_json::json!({"error": "no counts"});
        assert_eq!(check(&v), Ok(()));
        v["simulated"] = serde_json::json!({"cycle": 3});
        assert_eq!(
            check(&v),
            Err("field \"simulated.cycle\": not in the schema".into())
        );
        assert_eq!(
            check(&serde_json::json!([1])),
            Err("not an object but array".into())
        );
    }

    /// Runs `python3 -B -c SCRIPT` in container/programs with `input` on its stdin: its
    /// stdout, as JSON.
    fn python(script: &str, input: &Value) -> Value {
        use std::io::Write;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../container/programs");
        let mut child = std::process::Command::new("python3")
            .args(["-B", "-c", script])
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs (the timer's side of the contract is checked with it)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "python3 failed: {}{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    /// Any bytes in a file name or a bench's output (read the way the guard and the timer
    /// read them) make a line the harness reads: valid JSON within the contract, names not
    /// UTF-8 carried escaped, a figure no finite number is no figure.
    #[test]
    fn any_bytes_in_names_and_output_make_a_line_the_harness_reads() {
        let script = r#"
import json, random, re, sys
import output, timer_contract as c
rng = random.Random(int(sys.stdin.read()))
pattern = re.compile(r"t: (\S+)")
cases = []
for i in range(400):
    raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 48)))
    if i % 4 == 0:
        raw = b"9" * rng.randrange(300, 500) + raw  # a figure past a double's range
    text = raw.decode("utf-8", "surrogateescape")
    value, printed, masked = output.find_metric(["t: " + text], pattern, None)
    result = c.blank()
    result["changes"] = {text + "/tox.ini": "sha256:x"}
    result["stdout_tail"] = masked
    result["metric"] = {"value": value, "printed": printed}
    cases.append([c.line(c.checked(result)), c.undecodable(text) is not None])
print(json.dumps(cases))
"#;
        for seed in [1u64, 2, 3] {
            let out = python(script, &Value::from(seed));
            let mut escaped = 0;
            for case in out.as_array().unwrap() {
                let line = case[0].as_str().unwrap();
                let json = line
                    .trim()
                    .strip_prefix(&format!("{} ", SCHEMA.prefix))
                    .unwrap_or_else(|| panic!("no prefix: {line}"));
                let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
                assert_eq!(check(&v), Ok(()), "{json}");
                assert!(v["harness_error"].is_null(), "{json}");
                let value = &v["metric"]["value"];
                assert!(
                    value.is_null() || value.as_f64().is_some_and(f64::is_finite),
                    "{json}"
                );
                let name = v["changes"].as_object().unwrap().keys().next().unwrap();
                if case[1] == true {
                    assert!(
                        name.contains("\\x"),
                        "a name not UTF-8 is carried escaped: {name}"
                    );
                    escaped += 1;
                }
            }
            assert!(
                escaped > 100,
                "the cases hold names that are not UTF-8: {escaped}"
            );
        }
    }

    #[test]
    fn the_timers_check_is_the_same_contract() {
        // Results that each break the contract once, and one that keeps it: the timer's
        // check (timer_contract.py) and this one find the same, in the same words.
        let mut cases = Vec::new();
        let mut edit = |f: &dyn Fn(&mut Map<String, Value>)| {
            let mut v = blank();
            f(v.as_object_mut().unwrap());
            cases.push(v);
        };
        edit(&|_| {});
        edit(&|m| {
            m.insert("wall_seconds".into(), Value::from(1.5));
        });
        edit(&|m| {
            m.remove("exit_code");
        });
        edit(&|m| {
            m.insert("user_s".into(), Value::from("1.5"));
        });
        edit(&|m| {
            m.insert("cpu_probe_ms".into(), serde_json::json!([1.0, 2.0, 3.0]));
        });
        edit(&|m| {
            m.insert(
                "metric".into(),
                serde_json::json!({"value": 2, "printed": true}),
            );
        });
        edit(&|m| {
            m.insert(
                "reps".into(),
                serde_json::json!([{"wall_ns": 1, "user_s": 0.5, "sys_s": 0, "metric": null}]),
            );
        });
        edit(&|m| {
            m.insert("simulated".into(), serde_json::json!({"cycles": 1.5}));
        });
        let script = r#"
import json, sys
import timer_contract as c
cases = json.load(sys.stdin)
bad = dict(c.blank(), wall_ns="3", extra=1)
nan = dict(c.blank(), metric={"value": float("nan"), "printed": 1})
print(json.dumps({
    "blank": c.blank(),
    "prefix": c.prefix(),
    "problems": [c.problems(r) for r in cases],
    "error": c.error_result("it broke"),
    "checked": c.checked(bad),
    "nan": c.problems(nan),
    "good": c.checked(c.blank()) == c.blank(),
}))
"#;
        let out = python(script, &Value::Array(cases.clone()));
        assert_eq!(
            out["blank"],
            blank(),
            "the timer's empty result is this one"
        );
        assert_eq!(out["prefix"], SCHEMA.prefix);
        for (case, found) in cases.iter().zip(out["problems"].as_array().unwrap()) {
            let found: Vec<&str> = found
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            let ours = check(case).err();
            assert_eq!(
                ours.as_deref(),
                (!found.is_empty()).then(|| found.join("; ")).as_deref()
            );
        }
        assert_eq!(
            out["problems"][2],
            serde_json::json!(["field \"exit_code\": missing"])
        );
        // The harness error the timer prints instead keeps the contract and names the fields.
        assert_eq!(check(&out["error"]), Ok(()));
        assert_eq!(out["error"]["harness_error"], "it broke");
        assert_eq!(check(&out["checked"]), Ok(()));
        let why = out["checked"]["harness_error"].as_str().unwrap();
        assert!(
            why.contains("field \"extra\": not in the schema")
                && why.contains("field \"wall_ns\": expected integer, got string"),
            "{why}"
        );
        // A figure JSON cannot carry is caught before the line is printed.
        assert_eq!(
            out["nan"],
            serde_json::json!(["field \"metric.value\": expected number or null, got nan"])
        );
        assert_eq!(out["good"], true);
    }

    #[test]
    fn importing_the_timer_does_nothing() {
        // The timer's functions can be tested because importing it runs nothing.
        let script = r#"
import io, json, sys
out, sys.stdout = sys.stdout, io.StringIO()
import timed_run, timer_contract
printed, sys.stdout = sys.stdout.getvalue(), out
print(json.dumps({"printed": printed, "schema_read": timer_contract._schema is not None,
                  "main": callable(timed_run.main)}))
"#;
        let out = python(script, &Value::Null);
        assert_eq!(
            out,
            serde_json::json!({"printed": "", "schema_read": false, "main": true})
        );
    }
}
