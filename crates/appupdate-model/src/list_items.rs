//! The items of a LIST answer as the plugin reads them ([`ListItems`]): every field of each
//! object but its `metadata.managedFields`, with what owner detection needs of those kept
//! beside the items.
//!
//! Here rather than beside the request (`appupdate-kube`) for speed: generic code is built where
//! it is instantiated, at that crate's optimisation level, and a crate built for size
//! (`appupdate-kube` is at `"s"`) calls the instances that crates below it made instead of making
//! its own (rustc's share-generics), built for size too: reading the LIST there ran indexmap's
//! and serde_json's code in its `"z"` form. [`read_list_items`] is concrete, so the reader of a
//! LIST of 1 000 Ingresses is built in this crate, at 3 (docs/performance.md, item 27).

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use crate::compact_json::{Compact, Scratch};
use crate::owners::{self, Entry, FieldSet};

/// The items of the LIST answer `text` (JSON), as its [`Deserialize`] reads them.
pub fn read_list_items(text: &str) -> serde_json::Result<ListItems> {
    serde_json::from_str(text)
}

/// The `items` of a LIST answer, each read without its `metadata.managedFields`: the server's
/// bookkeeping of who set which field (a sixth of a listed Ingress of ten paths; every path
/// appears in it once more, as a key). This tool never sends a live object back (its writes are
/// patches, creates and deletes), so what it does not read cannot be lost; a listing of 1 000
/// such Ingresses takes ~3 MiB less memory to hold. Every other field is read as it is. An
/// answer without `items` (or with `null`) has none.
///
/// What owner detection needs of the managedFields is kept beside the items, by index: the
/// entries that may make their managers owners ([`owners::may_own`]: server-side appliers and
/// the Helm, Argo CD, Flux and kapp managers, never a subresource's, people's kubectl or this
/// tool's), each with its manager, whether it applies, and its field set cut to
/// [`owners::LISTED_DEPTH`] levels. Items whose entries are all someone else's keep nothing.
#[derive(Debug, Default, PartialEq)]
pub struct ListItems(pub Vec<Value>, pub Vec<(usize, Vec<Entry>)>);

impl<'de> Deserialize<'de> for ListItems {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Answer {
            #[serde(default)]
            items: Option<Vec<LiveItem>>,
        }
        let answer = Answer::deserialize(d)?;
        let mut items = Vec::new();
        let mut entries = Vec::new();
        for (index, LiveItem(item, owned)) in
            answer.items.unwrap_or_default().into_iter().enumerate()
        {
            items.push(item);
            if !owned.is_empty() {
                entries.push((index, owned));
            }
        }
        Ok(ListItems(items, entries))
    }
}

/// One listed object: an object whose `metadata` is read without `managedFields` ([`Level`]),
/// every array and object in it at its exact size ([`crate::compact_json`]); and the
/// entries of those managedFields that may own ([`ManagedFields`]).
struct LiveItem(Value, Vec<Entry>);

impl<'de> Deserialize<'de> for LiveItem {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut scratch = Scratch::default();
        let mut entries = Vec::new();
        d.deserialize_map(Listed(Level::Item, &mut scratch, &mut entries))
            .map(|item| LiveItem(item, entries))
    }
}

/// Which object of a listed item is being read into a [`Value`]: the item itself, whose
/// `metadata` is read as [`Level::Metadata`], or that metadata, read without `managedFields`.
#[derive(Clone, Copy)]
enum Level {
    Item,
    Metadata,
}

/// Reads the object at a [`Level`]; every other value compactly; the managedFields entries
/// that may own into the vector.
struct Listed<'s>(Level, &'s mut Scratch, &'s mut Vec<Entry>);

impl<'de> Visitor<'de> for Listed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Listed(level, scratch, entries) = self;
        // An item gets its `apiVersion` and `kind` when a LIST leaves them out (`Cluster::list`).
        let room = match level {
            Level::Item => 2,
            Level::Metadata => 0,
        };
        scratch
            .object_with_room(room, |scratch| {
                while let Some(key) = map.next_key::<String>()? {
                    let value = match (level, key.as_str()) {
                        (Level::Item, "metadata") => map.next_value_seed(Listed(
                            Level::Metadata,
                            &mut *scratch,
                            &mut *entries,
                        ))?,
                        (Level::Metadata, "managedFields") => {
                            map.next_value_seed(ManagedFields(&mut *entries))?;
                            continue;
                        }
                        _ => map.next_value_seed(Compact(&mut *scratch))?,
                    };
                    scratch.push_entry(key, value);
                }
                Ok(())
            })
            .map(Value::Object)
    }
}

/// Reads a listed object's `metadata.managedFields`, keeping only the entries that may own
/// ([`Entry::new`]); a value of any other shape is passed over, as the whole list was before.
struct ManagedFields<'s>(&'s mut Vec<Entry>);

impl<'de> DeserializeSeed<'de> for ManagedFields<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// Passes over a value whose shape is not the one expected.
macro_rules! pass_over_scalars {
    ($value:ty, $none:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<$value, E> {
            Ok($none)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<$value, E> {
            Ok($none)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<$value, E> {
            Ok($none)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<$value, E> {
            Ok($none)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<$value, E> {
            Ok($none)
        }
        fn visit_unit<E: de::Error>(self) -> Result<$value, E> {
            Ok($none)
        }
    };
}

impl<'de> Visitor<'de> for ManagedFields<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("managedFields")
    }

    pass_over_scalars!((), ());

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(entry) = seq.next_element_seed(ManagedEntry)? {
            self.0.extend(entry);
        }
        Ok(())
    }
}

/// One managedFields entry: kept ([`Entry::new`]) or not. Its field set is read only when its
/// manager and operation (which the server writes before it) may own.
struct ManagedEntry;

impl<'de> DeserializeSeed<'de> for ManagedEntry {
    type Value = Option<Entry>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<Entry>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ManagedEntry {
    type Value = Option<Entry>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a managedFields entry")
    }

    pass_over_scalars!(Option<Entry>, None);

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Entry>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Entry>, A::Error> {
        let (mut manager, mut operation, mut subresource) = (None, None, None);
        let mut fields = None;
        /// The keys of an entry this reads, matched without being copied.
        #[derive(Deserialize)]
        #[serde(field_identifier, rename_all = "camelCase")]
        enum Key {
            Manager,
            Operation,
            Subresource,
            #[serde(rename = "fieldsV1")]
            FieldsV1,
            #[serde(other)]
            Other,
        }
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Manager => manager = Some(map.next_value_seed(Text)?),
                Key::Operation => operation = Some(map.next_value_seed(Text)?),
                Key::Subresource => subresource = Some(map.next_value_seed(Text)?),
                Key::FieldsV1 => {
                    // An entry already known not to own is passed over unread.
                    let known_not = match (&manager, &operation) {
                        (Some(m), Some(o)) => !owners::may_own(m, o, ""),
                        _ => false,
                    };
                    if known_not {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        fields = Some(map.next_value_seed(Fields(owners::LISTED_DEPTH))?);
                    }
                }
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Entry::new(
            manager.as_deref().unwrap_or_default(),
            operation.as_deref().unwrap_or_default(),
            subresource.as_deref().unwrap_or_default(),
            fields.unwrap_or_default(),
        ))
    }
}

/// A string of a managedFields entry; a value of another shape reads as empty.
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = String;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Text {
    type Value = String;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Ok(String::new())
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(String::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(String::new())
    }
}

/// A `fieldsV1` value read `.0` levels deep ([`FieldSet::read`], from the text).
struct Fields(usize);

impl<'de> DeserializeSeed<'de> for Fields {
    type Value = FieldSet;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<FieldSet, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Fields {
    type Value = FieldSet;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a field set")
    }

    pass_over_scalars!(FieldSet, FieldSet::default());

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<FieldSet, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(FieldSet::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FieldSet, A::Error> {
        let Fields(depth) = self;
        let mut keys = Vec::new();
        let mut cut = false;
        if depth == 0 {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                cut = true;
            }
        } else {
            while let Some(key) = map.next_key::<String>()? {
                let below = map.next_value_seed(Fields(depth - 1))?;
                keys.push((key.into_boxed_str(), below));
            }
        }
        keys.shrink_to_fit();
        Ok(FieldSet::new(keys, cut))
    }
}

impl<'de> DeserializeSeed<'de> for Listed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn items(answer: &str) -> Vec<Value> {
        read_list_items(answer).unwrap_or_else(|e| panic!("{e}")).0
    }

    #[test]
    fn a_listed_object_is_read_whole_but_for_its_managed_fields() {
        let item = json!({
            "metadata": {
                "name": "web-public",
                "labels": {"app": "web"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                "resourceVersion": "7"
            },
            "spec": {"rules": [{"http": {"paths": [{"path": "/web/a", "managedFields": 1}]}}]},
            "managedFields": "kept: not in metadata",
            "status": {"loadBalancer": {}}
        });
        let answer =
            json!({"kind": "IngressList", "metadata": {"resourceVersion": "9"}, "items": [item]});
        let got = items(&answer.to_string());
        let mut want = item.clone();
        want["metadata"]
            .as_object_mut()
            .map(|m| m.remove("managedFields"));
        assert_eq!(got, vec![want]);
        // The order of the fields is the server's.
        let keys: Vec<&String> = got[0]["metadata"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["name", "labels", "resourceVersion"]);
    }

    #[test]
    fn the_managed_fields_entries_that_may_own_are_kept_cut_and_no_others() {
        let deep = json!({"f:spec": {"f:extAuth": {"f:http": {"f:path": {}, "f:backendRefs": {
            "k:{\"name\":\"auth\"}": {"f:port": {}}}}}}});
        let answer = json!({"items": [
            {"metadata": {"name": "mine", "managedFields": [
                {"manager": "kubectl-appupdate", "operation": "Update", "fieldsV1": deep.clone()},
                {"manager": "kubectl-client-side-apply", "operation": "Update", "fieldsV1": deep.clone()},
                {"manager": "helm", "operation": "Apply", "subresource": "status", "fieldsV1": {}},
            ]}},
            {"metadata": {"name": "theirs", "managedFields": [
                {"manager": "helm", "operation": "Apply", "apiVersion": "v1",
                 "fieldsType": "FieldsV1", "fieldsV1": deep.clone()},
                {"fieldsV1": deep.clone(), "operation": "Update", "manager": "argocd-controller"},
            ]}},
            {"metadata": {"name": "odd", "managedFields": [1, "x", null, [], {"manager": 3}]}},
            {"metadata": {"name": "none", "managedFields": null}},
        ]});
        let ListItems(items, entries) = read_list_items(&answer.to_string()).unwrap();
        assert_eq!(items.len(), 4);
        assert!(
            items
                .iter()
                .all(|i| i["metadata"].get("managedFields").is_none())
        );
        let cut = FieldSet::read(&deep, owners::LISTED_DEPTH);
        assert_eq!(
            entries,
            vec![(
                1,
                vec![
                    Entry::new("helm", "Apply", "", cut.clone()).unwrap(),
                    Entry::new("argocd-controller", "Update", "", cut).unwrap(),
                ]
            )]
        );
        // Cut four levels deep: the key under backendRefs is dropped.
        assert_ne!(
            FieldSet::read(&deep, owners::LISTED_DEPTH),
            FieldSet::read(&deep, usize::MAX)
        );
    }

    #[test]
    fn an_answer_without_items_has_none() {
        assert_eq!(
            items(r#"{"kind": "IngressList", "items": null}"#),
            Vec::<Value>::new()
        );
        assert_eq!(items(r#"{"kind": "IngressList"}"#), Vec::<Value>::new());
        assert_eq!(
            items(r#"{"items": [{"metadata": null}]}"#),
            vec![json!({"metadata": null})]
        );
    }

    #[test]
    fn an_item_that_is_not_an_object_is_a_decoding_error() {
        assert!(read_list_items(r#"{"items": [1]}"#).is_err());
        assert!(read_list_items(r#"{"items": [{"metadata": 1}]}"#).is_err());
    }
}
