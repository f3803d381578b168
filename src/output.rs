//! The plan as data (`-o json` / `-o yaml`), with a versioned schema documented in the README.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::{self, Write};

use serde::Serialize;

use crate::plan::{ObjectChange, Plan, Summary};

/// Schema identifier; bump on any incompatible change.
pub const SCHEMA_VERSION: &str = "kubectl-appupdate.plan/v1";

#[derive(Serialize)]
struct PlanDoc<'a> {
    schema: &'static str,
    app: &'a str,
    namespace: &'a str,
    context: &'a str,
    summary: Summary,
    objects: Vec<&'a ObjectChange>,
}

fn doc(plan: &Plan) -> PlanDoc<'_> {
    PlanDoc {
        schema: SCHEMA_VERSION,
        app: &plan.app,
        namespace: &plan.namespace,
        context: &plan.context,
        summary: plan.summary(),
        objects: plan.changes().collect(),
    }
}

pub fn write_json(out: &mut impl Write, plan: &Plan) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &doc(plan))?;
    writeln!(out)
}

pub fn write_yaml(out: &mut impl Write, plan: &Plan) -> io::Result<()> {
    let text = serde_saphyr::to_string(&doc(plan)).map_err(io::Error::other)?;
    out.write_all(text.as_bytes())
}
