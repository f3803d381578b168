//! Judges two runs of the same sequence step by step, on normalised responses.

use serde_json::{Map, Value, json};

use crate::normalize::{Difference, Side, body_value, first_difference, header_map};
use crate::run::Exchange;

/// One step where the two servers answered differently.
#[derive(Debug, Clone)]
pub struct StepDifference {
    /// 0 is the namespace creation; fixture files are numbered the same way.
    pub index: usize,
    pub step: String,
    pub request: String,
    pub left_status: Option<u16>,
    pub right_status: Option<u16>,
    pub difference: Difference,
}

#[derive(Debug, Clone, Default)]
pub struct Verdict {
    pub steps: usize,
    pub differences: Vec<StepDifference>,
    /// Steps whose status on the reference server is not what the sequence expects.
    pub unexpected: Vec<String>,
    /// Malformed random values, per side.
    pub left_problems: Vec<String>,
    pub right_problems: Vec<String>,
}

impl Verdict {
    pub fn identical(&self) -> bool {
        self.differences.is_empty()
            && self.left_problems.is_empty()
            && self.right_problems.is_empty()
    }
}

/// The normalised form of one exchange on one side.
pub fn normalized(ex: &Exchange, side: &mut Side) -> Value {
    if let Some(prefix) = ex
        .sent
        .as_ref()
        .and_then(|p| p.body.as_deref())
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .and_then(|b| {
            b.pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
    {
        side.hint_generate_name(&prefix);
    }
    if let Some(e) = &ex.got.error
        && ex.got.status == 0
    {
        return json!({ "error": e });
    }
    let headers: Map<String, Value> = header_map(&ex.got.headers);
    let mut v = side.response(
        ex.got.status,
        &headers,
        &body_value(&ex.got.body),
        ex.events.as_deref(),
    );
    if let Some(e) = &ex.got.error
        && let Some(m) = v.as_object_mut()
    {
        m.insert("error".into(), json!(e));
    }
    if !ex.during.is_empty()
        && let Some(m) = v.as_object_mut()
    {
        let during: Vec<Value> = ex.during.iter().map(|d| normalized(d, side)).collect();
        m.insert("during".into(), Value::Array(during));
    }
    v
}

fn status(ex: &Exchange) -> Option<u16> {
    (ex.got.status != 0).then_some(ex.got.status)
}

pub fn compare(left: &[Exchange], right: &[Exchange]) -> Verdict {
    let mut l = Side::default();
    let mut r = Side::default();
    let mut verdict = Verdict {
        steps: left.len(),
        ..Default::default()
    };
    for (i, (a, b)) in left.iter().zip(right).enumerate() {
        let na = normalized(a, &mut l);
        let nb = normalized(b, &mut r);
        if let Some(want) = a.expect
            && status(a) != Some(want)
        {
            verdict.unexpected.push(format!(
                "{i:02}-{}: expected {want}, got {}",
                a.step,
                status(a).map_or_else(
                    || a.got.error.clone().unwrap_or_default(),
                    |s| s.to_string()
                )
            ));
        }
        if let Some(d) = first_difference(&na, &nb, "") {
            verdict.differences.push(StepDifference {
                index: i,
                step: a.step.clone(),
                request: a.request_line(),
                left_status: status(a),
                right_status: status(b),
                difference: d,
            });
        }
    }
    verdict.left_problems = l.problems;
    verdict.right_problems = r.problems;
    verdict
}
