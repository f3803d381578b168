//! A view assembled from borrowed parts of other values (a live object and a patch), made into
//! a value at its size without copying the parts first: the planner builds a focused view
//! this way, and holds the value. Written (serialized), a view made from parts is written
//! from them, never made.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// A value assembled from parts of other values.
pub enum Part<'a> {
    Map(Vec<(&'a str, Part<'a>)>),
    Seq(Vec<Part<'a>>),
    Str(&'a str),
    Value(&'a Value),
}

impl Part<'_> {
    /// The value the part stands for, every array and map at its size.
    pub fn to_value(&self) -> Value {
        match self {
            Part::Map(entries) => {
                let mut map = Map::with_capacity(entries.len());
                for (key, part) in entries {
                    map.insert((*key).to_owned(), part.to_value());
                }
                Value::Object(map)
            }
            Part::Seq(items) => Value::Array(items.iter().map(Part::to_value).collect()),
            Part::Str(s) => Value::String((*s).to_owned()),
            Part::Value(v) => crate::compact_json::copy(v),
        }
    }
}

/// Written as the value it stands for ([`Part::to_value`]) would be, without making it.
impl Serialize for Part<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Part::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (key, part) in entries {
                    map.serialize_entry(key, part)?;
                }
                map.end()
            }
            Part::Seq(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Part::Str(text) => s.serialize_str(text),
            Part::Value(v) => v.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A part over `v`: its maps and sequences rebuilt as parts down to `depth`, its strings as
    /// borrowed strings, the rest as the values.
    fn part_of(v: &Value, depth: usize) -> Part<'_> {
        match v {
            Value::Object(m) if depth > 0 => Part::Map(
                m.iter()
                    .map(|(k, v)| (k.as_str(), part_of(v, depth - 1)))
                    .collect(),
            ),
            Value::Array(a) if depth > 0 => {
                Part::Seq(a.iter().map(|v| part_of(v, depth - 1)).collect())
            }
            Value::String(s) if depth > 0 => Part::Str(s),
            other => Part::Value(other),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// A part stands for the value it was made of.
        #[test]
        fn a_part_stands_for_its_value(v in crate::compact_json::tests::any_json(), depth in 0usize..5) {
            let part = part_of(&v, depth);
            prop_assert_eq!(&part.to_value(), &v);
        }

        /// A part is written exactly as its value is, in the documents' JSON.
        #[test]
        fn a_part_is_written_as_its_value(v in crate::compact_json::tests::any_json(), depth in 0usize..5) {
            let part = part_of(&v, depth);
            let mut from_part = Vec::new();
            crate::output::write_document(&mut from_part, crate::output::Format::Json, &part).unwrap();
            let mut from_value = Vec::new();
            crate::output::write_document(&mut from_value, crate::output::Format::Json, &part.to_value()).unwrap();
            prop_assert_eq!(from_part, from_value);
        }
    }
}
