//! ConfigMap (`v1`): no spec, no status and no generation; every key of `data` and
//! `binaryData` an `IsConfigMapKey`, no key in both, the values together at most 1 MiB;
//! `immutable: true` freezes the data and itself.

use serde_json::{Map, Value, json};

use super::table::{age, age_column, column, name_column, st};
use super::{Kind, Subresource};
use crate::model::ApiResource;
use crate::model::names::is_config_map_key;
use crate::model::schema;
use crate::model::status::{FieldError, go_quote};

pub struct ConfigMap;

pub static CONFIG_MAP: ConfigMap = ConfigMap;

static API: ApiResource = ApiResource {
    group: "",
    version: "v1",
    api_version: "v1",
    resource: "configmaps",
    kind: "ConfigMap",
    list_kind: "ConfigMapList",
    namespaced: true,
};

/// `core.MaxConfigMapSize`: the values of `data` and (decoded) `binaryData` together; keys do
/// not count.
const MAX_SIZE: usize = 1024 * 1024;

impl Kind for ConfigMap {
    fn api(&self) -> &'static ApiResource {
        &API
    }

    fn schema(&self) -> usize {
        schema::CONFIG_MAP
    }

    fn subresources(&self) -> &'static [Subresource] {
        &[]
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(old) = old {
            errs.extend(validate_update(obj, old));
        }
        errs.extend(validate_config_map(obj));
        errs
    }

    fn table_columns(&self) -> Vec<Value> {
        vec![
            name_column(),
            column(
                "Data",
                "string",
                "",
                "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
                0,
            ),
            age_column(),
        ]
    }

    fn table_cells(&self, obj: &Value, now: i64) -> Vec<Value> {
        let count = |key: &str| obj.get(key).and_then(Value::as_object).map_or(0, Map::len);
        vec![
            json!(st(obj, "/metadata/name")),
            json!(count("data") + count("binaryData")),
            json!(age(obj, now)),
        ]
    }
}

/// The decoded length of a canonical (padded) base64 text.
fn decoded_len(b64: &str) -> usize {
    let pad = b64.bytes().rev().take_while(|&c| c == b'=').count();
    (b64.len() / 4 * 3).saturating_sub(pad)
}

/// A map's entries in key order.
fn sorted(m: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

/// `ValidateConfigMap` (ObjectMeta aside). Keys come in sorted order (the real server walks Go
/// maps, in no fixed order).
fn validate_config_map(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let data = obj.get("data").and_then(Value::as_object).unwrap_or(&empty);
    let binary = obj
        .get("binaryData")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut total = 0usize;
    for (key, value) in sorted(data) {
        total += value.as_str().map_or(0, str::len);
        for m in is_config_map_key(key) {
            errs.push(FieldError::invalid(
                format!("data[{key}]"),
                &go_quote(key),
                &m,
            ));
        }
        if binary.contains_key(key) {
            errs.push(FieldError::invalid(
                format!("data[{key}]"),
                &go_quote(key),
                "duplicate of key present in binaryData",
            ));
        }
    }
    for (key, value) in sorted(binary) {
        total += value.as_str().map_or(0, decoded_len);
        for m in is_config_map_key(key) {
            errs.push(FieldError::invalid(
                format!("binaryData[{key}]"),
                &go_quote(key),
                &m,
            ));
        }
    }
    if total > MAX_SIZE {
        errs.push(FieldError::too_long("[]", MAX_SIZE));
    }
    errs
}

/// `ValidateConfigMapUpdate` beyond ObjectMeta: an immutable ConfigMap keeps its data and stays
/// immutable.
fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old.get("immutable") != Some(&json!(true)) {
        return errs;
    }
    const MSG: &str = "field is immutable when `immutable` is set";
    if new.get("immutable") != Some(&json!(true)) {
        errs.push(FieldError::forbidden("immutable", MSG));
    }
    for field in ["data", "binaryData"] {
        if new.get(field) != old.get(field) {
            errs.push(FieldError::forbidden(field, MSG));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::status::aggregate;

    #[test]
    fn keys_are_checked_in_both_maps_and_may_not_repeat() {
        let obj = json!({"data": {"a": "1", "a b": "2", "..": "3"}, "binaryData": {"a": "AA==", "c/d": "AA=="}});
        assert_eq!(
            aggregate(&validate_config_map(&obj)),
            "[data[..]: Invalid value: \"..\": must not be '..', data[a]: Invalid value: \"a\": duplicate of key present in binaryData, data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+'), binaryData[c/d]: Invalid value: \"c/d\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')]"
        );
    }

    #[test]
    fn values_and_decoded_binary_values_count_towards_one_mebibyte() {
        // 524288 + 524286 + 2 (AAA= is two bytes) = 1048576: allowed; keys do not count.
        let at_limit = json!({"data": {"a": "x".repeat(524_288), "b": "y".repeat(524_286)}, "binaryData": {"c": "AAA="}});
        assert!(validate_config_map(&at_limit).is_empty());
        let over = json!({"data": {"a": "x".repeat(524_288), "b": "y".repeat(524_287)}, "binaryData": {"c": "AAA="}});
        assert_eq!(
            aggregate(&validate_config_map(&over)),
            "[]: Too long: must have at most 1048576 bytes"
        );
    }

    #[test]
    fn an_immutable_config_map_keeps_its_data_and_stays_immutable() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let changed = json!({"data": {"a": "2"}, "binaryData": {"x": "AA=="}});
        assert_eq!(
            aggregate(&validate_update(&changed, &old)),
            "[immutable: Forbidden: field is immutable when `immutable` is set, data: Forbidden: field is immutable when `immutable` is set, binaryData: Forbidden: field is immutable when `immutable` is set]"
        );
        let labels_only =
            json!({"immutable": true, "data": {"a": "1"}, "metadata": {"labels": {"x": "y"}}});
        assert!(validate_update(&labels_only, &old).is_empty());
        let mutable = json!({"immutable": false, "data": {"a": "1"}});
        assert!(validate_update(&json!({"data": {}}), &mutable).is_empty());
    }
}
