//! A batch config's problems, every one at once, each with its line and column: keys a
//! place does not take (named with every key it does), values of the wrong type, and what
//! the checks of `config.rs` find.

use std::collections::HashMap;
use std::path::Path;

use serde::de::DeserializeOwned;

/// Problems as (where: a key path such as `k` or `entry[2].predictions`, what).
#[derive(Default)]
pub(super) struct Problems {
    items: Vec<(String, String)>,
}

impl Problems {
    pub fn push(&mut self, at: impl Into<String>, what: impl Into<String>) {
        self.items.push((at.into(), what.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// One line per problem, `FILE:LINE:COLUMN: what` (the key's place in `text`, or its
    /// table's when the key is missing), in the file's order.
    pub fn render(&self, text: &str, config: &Path) -> Vec<String> {
        let places = key_places(text);
        let place = |at: &str| -> Option<usize> {
            let mut at = at;
            loop {
                if let Some(p) = places.get(at) {
                    return Some(*p);
                }
                at = &at[..at.rfind('.')?];
            }
        };
        let mut lines: Vec<(usize, String)> = self
            .items
            .iter()
            .map(|(at, what)| match place(at) {
                Some(offset) => {
                    let (line, column) = line_column(text, offset);
                    (
                        offset,
                        format!("{}:{line}:{column}: {what}", config.display()),
                    )
                }
                None => (usize::MAX, format!("{}: {what}", config.display())),
            })
            .collect();
        lines.sort_by_key(|(offset, _)| *offset);
        lines.into_iter().map(|(_, l)| l).collect()
    }
}

/// Takes out of `table` the keys `allowed` does not list and the values `T` cannot read,
/// each a problem at `path` + key.
pub(super) fn screen<T: DeserializeOwned>(
    table: &mut toml::Table,
    allowed: &[String],
    path: &str,
    who: &str,
    problems: &mut Problems,
) {
    let keys: Vec<String> = table.keys().cloned().collect();
    for key in keys {
        let at = format!("{path}{key}");
        if !allowed.contains(&key) {
            problems.push(
                &at,
                format!(
                    "{who}{key}: unknown key (this place takes {})",
                    allowed.join(", ")
                ),
            );
            table.remove(&key);
            continue;
        }
        let mut one = toml::Table::new();
        one.insert(key.clone(), table[&key].clone());
        if let Err(e) = T::deserialize(one) {
            problems.push(&at, format!("{who}{key}: {}", e.message().trim_end()));
            table.remove(&key);
        }
    }
}

/// Where each key is, by byte offset: `name`, `entry[1]` (the table), `entry[1].model`.
fn key_places(text: &str) -> HashMap<String, usize> {
    use toml::de::{DeTable, DeValue};
    let mut out = HashMap::new();
    let Ok(doc) = DeTable::parse(text) else {
        return out;
    };
    for (key, value) in doc.get_ref() {
        let name = key.get_ref().to_string();
        out.insert(name.clone(), key.span().start);
        let DeValue::Array(items) = value.get_ref() else {
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            let here = format!("{name}[{}]", i + 1);
            out.insert(here.clone(), item.span().start);
            if let DeValue::Table(t) = item.get_ref() {
                for (k, _) in t {
                    out.insert(format!("{here}.{}", k.get_ref()), k.span().start);
                }
            }
        }
    }
    out
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
