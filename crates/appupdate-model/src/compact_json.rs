//! JSON read into a [`serde_json::Value`] whose every array and object is allocated at its
//! exact size.
//!
//! serde_json's own reader grows each array and object as it goes: a one-key object (most of
//! an Ingress path, `{"service": {"port": {"number": 80}}}`, is three of them) gets room for
//! three entries, an array of ten paths room for sixteen. Read this way, a listing of 1 000
//! Ingresses of ten paths each takes a third less memory. The value read is the same (`==`,
//! and the same key order), and so is what is refused.
//!
//! A copy has the same trouble: cloning an object gives it room for as many entries as its
//! hash index has (three for one), so [`copy`] is the clone of a large value that is kept.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The entries of the arrays and objects being read, those of an inner one on top of those of
/// the outer: each is moved out into an allocation of its size when it ends. One per read.
#[derive(Default)]
pub struct Scratch {
    values: Vec<Value>,
    entries: Vec<(String, Value)>,
}

impl Scratch {
    /// An object's entries, read by `read` (which pushes them with [`Scratch::push_entry`]),
    /// as a map of their number.
    pub fn object<E>(
        &mut self,
        read: impl FnOnce(&mut Scratch) -> Result<(), E>,
    ) -> Result<Map<String, Value>, E> {
        self.object_with_room(0, read)
    }

    /// [`Scratch::object`] with room for `room` entries more (that the caller adds).
    pub fn object_with_room<E>(
        &mut self,
        room: usize,
        read: impl FnOnce(&mut Scratch) -> Result<(), E>,
    ) -> Result<Map<String, Value>, E> {
        let start = self.entries.len();
        read(self)?;
        let mut map = Map::with_capacity(self.entries.len() - start + room);
        map.extend(self.entries.drain(start..));
        Ok(map)
    }

    pub fn push_entry(&mut self, key: String, value: Value) {
        self.entries.push((key, value));
    }
}

/// Reads one value (any JSON) compactly.
pub struct Compact<'s>(pub &'s mut Scratch);

impl<'de> DeserializeSeed<'de> for Compact<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Compact<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let scratch = self.0;
        let start = scratch.values.len();
        while let Some(v) = seq.next_element_seed(Compact(&mut *scratch))? {
            scratch.values.push(v);
        }
        Ok(Value::Array(scratch.values.drain(start..).collect()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0
            .object(|scratch| {
                while let Some(key) = map.next_key::<String>()? {
                    let value = map.next_value_seed(Compact(&mut *scratch))?;
                    scratch.push_entry(key, value);
                }
                Ok(())
            })
            .map(Value::Object)
    }
}

/// `text` read compactly.
pub fn from_str(text: &str) -> serde_json::Result<Value> {
    let mut d = serde_json::Deserializer::from_str(text);
    let v = Compact(&mut Scratch::default()).deserialize(&mut d)?;
    d.end()?;
    Ok(v)
}

/// A deep copy of `v` with every array and object at its exact size: `==` to `v.clone()`,
/// which takes half as much again for an Ingress path. It costs hashing each key once more.
pub fn copy(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(copy_all(a)),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), copy(v))).collect()),
        other => other.clone(),
    }
}

/// [`copy`] of each of `values`.
pub fn copy_all(values: &[Value]) -> Vec<Value> {
    values.iter().map(copy).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn capacities_are_exact(v: &Value) -> bool {
        match v {
            Value::Array(a) => a.capacity() == a.len() && a.iter().all(capacities_are_exact),
            Value::Object(m) => m.values().all(capacities_are_exact),
            _ => true,
        }
    }

    #[test]
    fn arrays_are_read_at_their_size_and_values_as_serde_json_reads_them() {
        let text = r#"{"b": [1, -2, 2.5, "x", null, true, [], {}], "a": {"k": [[1], [2, 3]]},
                       "b": "later wins, in the first place", "big": 18446744073709551615}"#;
        let v = from_str(text).unwrap_or_else(|e| panic!("{e}"));
        let want: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v, want);
        let keys: Vec<&String> = v
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["b", "a", "big"]);
        assert!(capacities_are_exact(&v));
        let mut paths = Vec::new();
        for i in 0..10 {
            paths.push(json!(i));
        }
        let grown = Value::Array(paths);
        assert!(!capacities_are_exact(&grown), "the check can fail");
    }

    #[test]
    fn what_serde_json_refuses_is_refused() {
        for bad in ["{", "[1,]", r#"{"a" 1}"#, "1 2", "[1e999]", "nul"] {
            assert_eq!(
                from_str(bad).is_err(),
                serde_json::from_str::<Value>(bad).is_err(),
                "{bad}"
            );
        }
    }

    /// Random JSON: every type, nested, with strings that need escaping.
    pub(crate) fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|n| json!(n)),
            "[a-z\\\\\"\u{1b}é]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-d]{1,2}", inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn reads_what_serde_json_reads(v in any_json()) {
            let text = v.to_string();
            let read = from_str(&text).unwrap_or_else(|e| panic!("{e}"));
            // Compared with serde_json's own reading of the text, not with `v`: without its
            // float_roundtrip feature serde_json may read a float's shortest text one unit in
            // the last place away (-938286.0547041183 reads as …184), and so does this reader,
            // which is serde_json's parser.
            let expected: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
            prop_assert_eq!(&read, &expected);
            prop_assert_eq!(read.to_string(), expected.to_string());
            prop_assert!(capacities_are_exact(&read));
        }

        #[test]
        fn a_copy_is_equal_to_the_value(v in any_json()) {
            let copied = copy(&v);
            prop_assert_eq!(&copied, &v);
            prop_assert_eq!(copied.to_string(), v.to_string());
        }
    }

    /// The float the property test once found: serde_json reads its shortest text one unit in
    /// the last place away, and this reader must read it the same way.
    #[test]
    fn reads_a_float_as_serde_json_reads_it() {
        let text = r#"{"a":-938286.0547041183}"#;
        let expected: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(from_str(text).unwrap_or_else(|e| panic!("{e}")), expected);
    }
}
