//! The bottom layer: what an API object is, independent of any kind's rules and of storage.
//!
//! * [`schema`] — the Go types behind the served kinds, as data (field order, `omitempty`,
//!   pointers, list and map merge strategies), and decoding through them;
//! * [`object`] — the names of a served resource ([`ApiResource`]) and object-level helpers
//!   (`kind`/`apiVersion` first, metadata access, list bodies);
//! * [`names`] — name and label checks with apimachinery's messages;
//! * [`quantity`], [`time`] — `resource.Quantity` and `metav1.Time` as Go serialises them;
//! * [`gojson`] — JSON the way encoding/json writes and rejects it;
//! * [`goyaml`] — YAML the way the API server writes it;
//! * [`registered`] — the kinds the real server's scheme knows;
//! * [`status`] — `metav1.Status` errors and `field.Error`s;
//! * [`selector`] — label and field selector grammar.
//!
//! Nothing here knows a particular kind, the store or HTTP.

pub mod gojson;
pub mod goyaml;
pub mod names;
pub mod object;
pub mod quantity;
pub mod registered;
pub mod schema;
pub mod selector;
pub mod status;
pub mod time;

pub use object::ApiResource;
