//! Judges two runs of the same sequence step by step, on normalised responses.

use serde_json::Value;

use crate::normalize::{
    Difference, Observed, Side, body_value, differences, header_map, starts_with_initial_events,
};
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
    /// The first few differences of the step (the first is `difference`).
    pub more: Vec<Difference>,
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

/// One exchange of the harness as data for the judge.
pub fn observed(ex: &Exchange) -> Observed {
    Observed {
        status: ex.got.status,
        headers: header_map(&ex.got.headers),
        body: body_value(&ex.got.body),
        events: ex.events.clone(),
        error: ex.got.error.clone(),
        generate_name: ex
            .sent
            .as_ref()
            .and_then(|p| p.body.as_deref())
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
            .and_then(|b| {
                b.pointer("/metadata/generateName")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }),
        during: ex.during.iter().map(observed).collect(),
        initial_events: ex.events.is_some()
            && ex
                .sent
                .as_ref()
                .is_some_and(|p| starts_with_initial_events(&p.target)),
    }
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
        let na = l.exchange(&observed(a));
        let nb = r.exchange(&observed(b));
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
        // When the statuses differ, the rest of two different bodies is noise: show what
        // each said instead.
        let all = if na.get("status") != nb.get("status") {
            let said = |v: &Value| {
                let b = &v["body"];
                serde_json::json!({"status": v["status"], "error": v.get("error"), "body": {
                    "kind": b.get("kind"), "reason": b.get("reason"), "message": b.get("message")}})
            };
            differences(&said(&na), &said(&nb), "", 4)
        } else {
            differences(&na, &nb, "", 6)
        };
        if let Some(d) = all.first().cloned() {
            verdict.differences.push(StepDifference {
                index: i,
                step: a.step.clone(),
                request: a.request_line(),
                left_status: status(a),
                right_status: status(b),
                difference: d,
                more: all.into_iter().skip(1).collect(),
            });
        }
    }
    verdict.left_problems = l.problems;
    verdict.right_problems = r.problems;
    verdict
}
