//! The combined plan of a run over several clusters (a fleet), as data: each cluster's plan,
//! the clusters left out (`--skip-unreachable`), the clusters whose plans are identical folded
//! into one section, and the totals.
//!
//! Two plans are identical when everything a person is shown is: the namespace, and for every
//! object its kind, name, action, changed fields, the views the diff shows and the endpoints
//! it serves — that is, the `-o json` document without the context and without the
//! `resourceVersion` and `uid` each write is conditional on (those differ from cluster to
//! cluster even when the change is the same) — and the image check's notes. The image is
//! resolved once for a run, but its platforms are checked per cluster (against its nodes, or
//! its live image): clusters whose checks found different things are not folded, so every
//! section's notes hold for each of its clusters.
//!
//! A fleet of thousands stays readable: a list of clusters names at most [`NAMED`] of them and
//! says how many more there are ([`some_names`]); the report does the same for the clusters
//! that ended the same way.

use crate::updaters::Plan;
use appupdate_model::output::{self, PlanDocument};
use appupdate_model::owners::ObjectOwners;
use appupdate_model::plan::Summary;

/// One cluster of the fleet: planned, or left out.
#[derive(Clone, Copy, Debug)]
pub enum Member<'a> {
    Planned(&'a Plan),
    /// `--skip-unreachable`: the context, and why (one line, values escaped).
    Skipped {
        context: &'a str,
        reason: &'a str,
    },
}

impl Member<'_> {
    pub fn context(&self) -> &str {
        match self {
            Member::Planned(plan) => &plan.context,
            Member::Skipped { context, .. } => context,
        }
    }
}

/// The plans of one run over several clusters, in the order of the contexts.
#[derive(Clone, Debug)]
pub struct FleetPlan<'a> {
    pub app: &'a str,
    pub members: Vec<Member<'a>>,
    /// The contexts in waves, in the order they are written (`--wave`); empty without.
    pub waves: &'a [Vec<String>],
    /// Who else owns fields each cluster's plan changes, by context (the clusters with owners).
    pub owners: Vec<(&'a str, &'a [ObjectOwners])>,
}

/// Clusters whose plans are identical, shown once: the first one's plan stands for all.
#[derive(Clone, Debug)]
pub struct Section<'a> {
    pub plans: Vec<&'a Plan>,
}

impl<'a> Section<'a> {
    /// The plan the section shows.
    pub fn plan(&self) -> &'a Plan {
        self.plans[0]
    }

    pub fn contexts(&self) -> Vec<&'a str> {
        self.plans.iter().map(|p| p.context.as_str()).collect()
    }
}

/// How many names a list of clusters (or namespaces) shows; a longer one shows the first few
/// and how many more there are.
pub const NAMED: usize = 8;

/// `names` (each already escaped for the terminal) joined with `, `: every one of them when
/// there are at most [`NAMED`], else the first [`NAMED`] − 2 and `and N more`.
pub fn some_names<S: AsRef<str>>(names: &[S]) -> String {
    if names.len() <= NAMED {
        return names
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(", ");
    }
    let first: Vec<&str> = names[..NAMED - 2].iter().map(AsRef::as_ref).collect();
    format!(
        "{} and {} more",
        first.join(", "),
        names.len() - first.len()
    )
}

/// What a plan shows, without what differs between clusters that get the same change.
fn shown(plan: &Plan) -> PlanDocument<'_> {
    let mut doc = output::document(plan);
    doc.context = "";
    for object in &mut doc.objects {
        object.resource_version = None;
        object.uid = None;
    }
    doc
}

/// Whether `a` and `b` show the same change (see the module's documentation).
pub fn same_plan(a: &Plan, b: &Plan) -> bool {
    a.app == b.app && a.image_notes == b.image_notes && shown(a) == shown(b)
}

impl<'a> FleetPlan<'a> {
    pub fn plans(&self) -> impl Iterator<Item = &'a Plan> + '_ {
        self.members.iter().filter_map(|m| match m {
            Member::Planned(p) => Some(*p),
            Member::Skipped { .. } => None,
        })
    }

    /// Who else owns fields the plan of `context` changes.
    pub fn owners_of(&self, context: &str) -> &'a [ObjectOwners] {
        self.owners
            .iter()
            .find(|(c, _)| *c == context)
            .map_or(&[], |(_, o)| *o)
    }

    pub fn skipped(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        self.members.iter().filter_map(|m| match m {
            Member::Skipped { context, reason } => Some((*context, *reason)),
            Member::Planned(_) => None,
        })
    }

    /// The planned clusters, identical plans folded, each section where its first cluster
    /// is in the order of the contexts.
    pub fn sections(&self) -> Vec<Section<'a>> {
        let mut sections: Vec<(PlanDocument, Section<'a>)> = Vec::new();
        for plan in self.plans() {
            let doc = shown(plan);
            match sections.iter_mut().find(|(d, s)| {
                *d == doc && s.plan().app == plan.app && s.plan().image_notes == plan.image_notes
            }) {
                Some((_, section)) => section.plans.push(plan),
                None => sections.push((doc, Section { plans: vec![plan] })),
            }
        }
        sections.into_iter().map(|(_, s)| s).collect()
    }

    /// The section number of each planned cluster, by context (for `-o json`).
    pub fn section_of(&self) -> Vec<(&'a str, usize)> {
        self.sections()
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.contexts().into_iter().map(move |c| (c, i)))
            .collect()
    }

    /// Every planned cluster's counts added up.
    pub fn total(&self) -> Summary {
        self.plans().fold(Summary::default(), |mut t, p| {
            let s = p.summary();
            t.create += s.create;
            t.update += s.update;
            t.delete += s.delete;
            t.unchanged += s.unchanged;
            t
        })
    }

    pub fn has_changes(&self) -> bool {
        self.plans().any(Plan::has_changes)
    }

    /// Planned clusters with something to change.
    pub fn changing(&self) -> usize {
        self.plans().filter(|p| p.has_changes()).count()
    }
}

/// The closing line of the combined plan: the totals over every cluster.
pub fn total_line(fleet: &FleetPlan) -> String {
    let t = fleet.total();
    let planned = fleet.plans().count();
    let clusters = |n: usize| format!("{n} cluster{}", if n == 1 { "" } else { "s" });
    let mut line = if t.has_changes() {
        format!(
            "Total: {} to create, {} to update, {} to delete, on {} of {}.",
            t.create,
            t.update,
            t.delete,
            fleet.changing(),
            clusters(planned)
        )
    } else {
        format!("Total: no changes on any of {}.", clusters(planned))
    };
    let skipped = fleet.skipped().count();
    if skipped > 0 {
        line.push_str(&format!(" {} skipped.", clusters(skipped)));
    }
    line
}

/// `--max-failed`: how many clusters of a wave may end other than as planned with the next
/// wave still starting. The one rule of the wave order; without waves (everyone at once, or a
/// canary then the rest) the budget is [`FailureBudget::NONE`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailureBudget {
    pub max_failed: usize,
}

impl FailureBudget {
    /// No failure allowed: a canary's failure stops the rest.
    pub const NONE: FailureBudget = FailureBudget { max_failed: 0 };

    pub fn new(max_failed: usize) -> FailureBudget {
        FailureBudget { max_failed }
    }

    /// How many of `ends` did not end as planned.
    pub fn failed<T>(ends: impl IntoIterator<Item = T>, as_planned: impl Fn(&T) -> bool) -> usize {
        ends.into_iter().filter(|e| !as_planned(e)).count()
    }

    /// Whether a wave whose clusters ended as `ends` stayed within the budget (the next wave
    /// may start): no more than `max_failed` of them did not end as planned.
    pub fn holds<T>(
        &self,
        ends: impl IntoIterator<Item = T>,
        as_planned: impl Fn(&T) -> bool,
    ) -> bool {
        Self::failed(ends, as_planned) <= self.max_failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::updaters::{AutoscalerUpdate, AutoscalerUpdater};
    use crate::updaters::{Planned, Updater};
    use appupdate_model::plan::{Action, ObjectChange};
    use serde_json::json;
    use std::sync::Arc;

    fn plan(context: &str, rv: &str, max: i64) -> Plan {
        plan_in(context, "shop", rv, max)
    }

    fn plan_in(context: &str, namespace: &str, rv: &str, max: i64) -> Plan {
        let hpa = AutoscalerUpdater {
            name: "web".into(),
            update: AutoscalerUpdate {
                min_replicas: None,
                max_replicas: Some(9),
            },
        };
        let live = json!({"metadata": {"name": "web", "resourceVersion": rv, "uid": format!("u-{rv}")},
            "spec": {"minReplicas": 2, "maxReplicas": max}});
        let change: ObjectChange = hpa.plan(namespace, Some(&live)).unwrap();
        Plan::new(
            "web".into(),
            namespace.into(),
            context.into(),
            vec![Planned::new(Updater::Autoscaler(hpa), Arc::new(change))],
        )
    }

    /// The fleet of `members`, without waves or owners.
    fn fleet(members: Vec<Member<'_>>) -> FleetPlan<'_> {
        FleetPlan {
            app: "web",
            members,
            waves: &[],
            owners: Vec::new(),
        }
    }

    #[test]
    fn plans_that_differ_only_in_resource_versions_fold_into_one_section() {
        let (a, b, c) = (plan("a", "10", 5), plan("b", "77", 5), plan("c", "10", 4));
        let fleet = fleet(vec![
            Member::Planned(&a),
            Member::Skipped {
                context: "x",
                reason: "unreachable",
            },
            Member::Planned(&b),
            Member::Planned(&c),
        ]);
        let sections = fleet.sections();
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].contexts(), ["a", "b"]);
        assert_eq!(sections[1].contexts(), ["c"]);
        assert_eq!(fleet.section_of(), [("a", 0), ("b", 0), ("c", 1)]);
        assert!(same_plan(&a, &b) && !same_plan(&a, &c));
        assert_eq!(fleet.total().update, 3);
        assert_eq!(
            total_line(&fleet),
            "Total: 0 to create, 3 to update, 0 to delete, on 3 of 3 clusters. 1 cluster skipped."
        );
    }

    #[test]
    fn clusters_whose_platform_checks_differ_are_not_folded() {
        let note = |p: &str| {
            vec![
                "image r.example/web:2 → sha256:d (linux/amd64, linux/arm64)".to_owned(),
                format!("platforms checked against the nodes the pods can land on: {p}"),
            ]
        };
        let (mut a, mut b, mut c) = (plan("a", "1", 5), plan("b", "1", 5), plan("c", "1", 5));
        a.image_notes = note("linux/amd64");
        b.image_notes = note("linux/amd64, linux/arm64");
        c.image_notes = note("linux/amd64");
        let fleet = fleet(vec![
            Member::Planned(&a),
            Member::Planned(&b),
            Member::Planned(&c),
        ]);
        let sections = fleet.sections();
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].contexts(), ["a", "c"]);
        assert_eq!(sections[1].contexts(), ["b"]);
        assert_eq!(sections[1].plan().image_notes, b.image_notes);
        assert!(same_plan(&a, &c) && !same_plan(&a, &b));
    }

    #[test]
    fn the_same_change_in_another_namespace_is_another_section() {
        // The views the diff shows name the namespace.
        let a = plan("a", "10", 5);
        let b = plan_in("b", "shop-b", "11", 5);
        let c = plan_in("c", "shop-b", "12", 5);
        let fleet = fleet(vec![
            Member::Planned(&a),
            Member::Planned(&b),
            Member::Planned(&c),
        ]);
        let sections = fleet.sections();
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[1].contexts(), ["b", "c"]);
    }

    #[test]
    fn a_long_list_of_names_shows_the_first_few_and_how_many_more() {
        let names: Vec<String> = (0..2000).map(|i| format!("c{i:04}")).collect();
        assert_eq!(
            some_names(&names),
            "c0000, c0001, c0002, c0003, c0004, c0005 and 1994 more"
        );
        assert_eq!(
            some_names(&names[..NAMED]),
            "c0000, c0001, c0002, c0003, c0004, c0005, c0006, c0007"
        );
        assert_eq!(some_names(&names[..1]), "c0000");
        assert_eq!(some_names::<&str>(&[]), "");
    }

    #[test]
    fn a_fleet_without_changes_says_so_in_total() {
        let a = plan("a", "1", 9);
        assert_eq!(a.objects[0].change.action(), Action::Unchanged);
        let fleet = fleet(vec![Member::Planned(&a)]);
        assert!(!fleet.has_changes());
        assert_eq!(total_line(&fleet), "Total: no changes on any of 1 cluster.");
    }

    #[test]
    fn a_wave_within_its_budget_lets_the_next_one_start() {
        let ok = |b: &bool| *b;
        assert!(FailureBudget::NONE.holds([true, true], ok));
        assert!(!FailureBudget::NONE.holds([true, false], ok));
        assert!(FailureBudget::new(1).holds([false, true, true], ok));
        assert!(!FailureBudget::new(1).holds([false, false, true], ok));
        assert!(FailureBudget::new(2).holds([false, false], ok));
        assert_eq!(FailureBudget::failed([false, true, false], ok), 2);
        // An empty wave never exceeds a budget.
        assert!(FailureBudget::NONE.holds(Vec::<bool>::new(), ok));
    }

    proptest::proptest! {
        /// The budget holds exactly when the failures are at most `--max-failed`.
        #[test]
        fn the_budget_is_the_count_of_failures_against_max_failed(
            ends in proptest::collection::vec(proptest::bool::ANY, 0..8),
            max_failed in 0usize..5,
        ) {
            let failed = ends.iter().filter(|ok| !**ok).count();
            proptest::prop_assert_eq!(
                FailureBudget::new(max_failed).holds(ends.iter(), |ok| **ok),
                failed <= max_failed
            );
        }
    }
}
