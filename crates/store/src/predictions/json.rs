//! The streaming JSON reader of predictions rows: a patch past the size limit is counted, never held.

use std::fmt;

use harness_core::digest::sha256_hex;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

// ---------------------------------------------------------------------------------------
// Parsing: a JSON value as the loader needs it, with long patches measured, not kept

/// What a row's object held. Known fields keep their value as found; types are checked
/// later so that the warning can name the field.
#[derive(Debug, Default)]
pub(super) struct RawRow {
    pub(super) instance_id: Option<Json>,
    pub(super) model: Option<Json>,
    pub(super) patch: Option<Json>,
    pub(super) sample: Option<Json>,
    /// `agent_usage` and `agent_seconds`, as written.
    pub(super) agent_usage: Option<serde_json::Value>,
    pub(super) agent_seconds: Option<serde_json::Value>,
    pub(super) unknown: Vec<String>,
    pub(super) repeated: Vec<&'static str>,
}

#[derive(Debug)]
pub(super) enum Json {
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
    pub(super) fn describe(&self) -> String {
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
pub(super) enum Mode {
    /// A field's value; a string longer than `max_text` becomes [`Json::TooLarge`].
    Field { max_text: Option<usize> },
    /// An object is read as a row.
    Row { max_patch: usize },
    /// An object is a row, a list is a list of rows.
    Entry { max_patch: usize },
}

pub(super) struct JsonSeed(pub(super) Mode);

impl<'de> DeserializeSeed<'de> for JsonSeed {
    type Value = Json;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor(self.0))
    }
}

pub(super) struct JsonVisitor(Mode);

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

pub(super) fn read_row<'de, A: MapAccess<'de>>(
    mut map: A,
    max_patch: usize,
) -> Result<RawRow, A::Error> {
    let mut row = RawRow::default();
    while let Some(key) = map.next_key::<String>()? {
        let (name, max_text): (&'static str, Option<usize>) = match key.as_str() {
            "instance_id" => ("instance_id", None),
            "model_name_or_path" => ("model_name_or_path", None),
            "model_patch" => ("model_patch", Some(max_patch)),
            "sample" => ("sample", None),
            // What `harness agent run` adds to a row: read by the agent's own reports.
            "agent_usage" => {
                row.agent_usage = Some(map.next_value()?);
                continue;
            }
            "agent_seconds" => {
                row.agent_seconds = Some(map.next_value()?);
                continue;
            }
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

pub(super) enum Doc {
    List(Vec<Json>),
    Keyed(Vec<(String, Json)>),
}

pub(super) struct DocSeed {
    pub(super) max_patch: usize,
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
