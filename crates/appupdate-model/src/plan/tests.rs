use super::*;
use std::collections::BTreeSet;

use serde_json::json;

#[test]
fn a_typed_field_is_written_and_read_back_as_the_path_plans_have_saved() {
    for (field, path) in [
        (
            Field::Image { container: "web" },
            "spec.template.spec.containers[name=web].image",
        ),
        (Field::MinReplicas, "spec.minReplicas"),
        (Field::MaxReplicas, "spec.maxReplicas"),
        (Field::Whole, "."),
    ] {
        assert_eq!(field.path(), path);
        assert_eq!(Field::parse(path), Some(field));
        assert_eq!(FieldChange::of(field, None, None).field(), Some(field));
    }
    for route in [
        "spec.rules[0].http.paths",
        "metadata.annotations[nginx.ingress.kubernetes.io/auth-url]",
        "spec.template.spec.containers[name=web].command",
    ] {
        assert_eq!(Field::parse(route), None, "{route}");
    }
}

/// A view made from a value it keeps (a maker's simplest form).
struct Fixed(Value);

impl MakeView for Fixed {
    fn make(&self) -> Value {
        self.0.clone()
    }
}

#[test]
fn a_view_held_or_made_is_written_and_read_as_the_value() {
    let value = json!({
        "metadata": {"name": "web-a", "annotations": {"x": "a \"q\"\n\u{1b}[31m é 🚀"}},
        "spec": {"n": -3, "u": 18446744073709551615_u64, "f": 0.1, "b": true, "z": null,
                 "rules": [{"http": {"paths": []}}, {}]}
    });
    let held = View::from(value.clone());
    let made = View::made(Fixed(value.clone()));
    for view in [&held, &made] {
        assert_eq!(*view.get(), value);
        // Key order kept, written as the value is.
        assert_eq!(
            serde_json::to_string_pretty(view).unwrap_or_default(),
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
        let read: View = serde_json::from_str(&text_json(view)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read, *view);
        assert_ne!(View::from(json!({"a": 1})), *view);
    }
    assert_eq!(held, made);
    assert!(matches!(made.get(), Cow::Owned(_)) && matches!(held.get(), Cow::Borrowed(_)));
}

#[test]
fn a_part_of_a_view_is_found_as_value_pointer_finds_it() {
    let value = json!({
        "a": {"b": [10, {"c/d": "x", "e~f": [true]}, []], "b2": null},
        "spec": {"rules": [{"http": {"paths": [{"path": "/a"}]}}, {"host": "h"}]},
        "": {"": 1}
    });
    let views = [View::from(value.clone()), View::made(Fixed(value.clone()))];
    for pointer in [
        "",
        "/a",
        "/a/b/1/c~1d",
        "/a/b/1/e~0f/0",
        "/a/b2",
        "/spec/rules/0/http/paths",
        "/spec/rules/2",
        "/a/b/01",
        "/a/b/-",
        "/x",
        "//",
        "a",
    ] {
        for view in &views {
            assert_eq!(
                view.pointer(pointer).as_deref(),
                value.pointer(pointer),
                "{pointer}"
            );
        }
    }
}

#[test]
fn a_whole_object_field_is_its_views_value() {
    let value = json!({"metadata": {"name": "web-a"}, "spec": {"rules": []}});
    for view in [View::from(value.clone()), View::made(Fixed(value.clone()))] {
        let deleted = FieldChange::whole(Some(&view), None);
        let created = FieldChange::whole(None, Some(&view));
        assert_eq!(deleted, FieldChange::new(".", Some(value.clone()), None));
        assert_eq!(created, FieldChange::new(".", None, Some(value.clone())));
        assert_eq!(deleted.before().as_deref(), Some(&value));
        assert_eq!(
            serde_json::to_value(&created).unwrap_or_default(),
            json!({"path": ".", "before": null, "after": value})
        );
    }
}

fn text_json(v: &View) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[test]
fn a_field_value_in_a_view_is_the_views_part_compared_and_saved_as_that_value() {
    let value = json!({"spec": {"rules": [{"http": {"paths": [{"path": "/a"}]}}]}});
    let paths = json!([{"path": "/a"}]);
    let pointer = "/spec/rules/0/http/paths";
    // In a view held as a value, and in one made when read.
    let held = View::from(value.clone());
    let text = View::made(Fixed(value.clone()));
    assert_eq!(held, text);
    assert_eq!(*text.get(), value);
    assert!(matches!(text.get(), Cow::Owned(_)) && matches!(held.get(), Cow::Borrowed(_)));
    let in_text = FieldValue::in_view(&text, &value, pointer);
    let Some(shared) = FieldValue::in_view(&held, &value, pointer) else {
        panic!("the pointer resolves")
    };
    assert_eq!(*shared.value(), paths);
    assert_eq!(
        in_text.as_ref().map(FieldValue::value),
        Some(Cow::Borrowed(&paths))
    );
    assert_eq!(shared, FieldValue::from(paths.clone()));
    assert_ne!(shared, FieldValue::from(json!([])));
    assert!(FieldValue::in_view(&held, &value, "/spec/rules/1/http/paths").is_none());

    let field = FieldChange {
        path: "spec.rules[0].http.paths".into(),
        before: None,
        after: Some(shared),
    };
    assert_eq!(
        field,
        FieldChange::new("spec.rules[0].http.paths", None, Some(paths.clone()))
    );
    assert_eq!(field.after().as_deref(), Some(&paths));
    let saved = serde_json::to_value(&field).unwrap_or_default();
    assert_eq!(
        saved,
        json!({"path": "spec.rules[0].http.paths", "before": null, "after": paths})
    );
    let read: FieldChange = serde_json::from_value(saved).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read, field);
    assert_eq!(format!("{:?}", read.after), format!("{:?}", field.after));
}

fn change(action: Action, fields: Vec<FieldChange>) -> ObjectChange {
    ObjectChange {
        kind: Kind::HorizontalPodAutoscaler,
        namespace: "shop".into(),
        name: "web".into(),
        live: Base::new("1", "u1"),
        fields,
        before: None,
        after: None,
        write: Write::sample(action),
        route: None,
    }
}

fn min(before: i64, after: i64) -> FieldChange {
    FieldChange::of(Field::MinReplicas, Some(json!(before)), Some(json!(after)))
}

fn max(before: i64, after: i64) -> FieldChange {
    FieldChange::of(Field::MaxReplicas, Some(json!(before)), Some(json!(after)))
}

#[test]
fn guard_proceeds_when_the_fresh_change_is_the_approved_one() {
    let approved = change(Action::Update, vec![min(2, 3), max(5, 8)]);
    let fresh = change(Action::Update, vec![min(2, 3), max(5, 8)]);
    assert!(matches!(recheck(&approved, fresh), Recheck::Proceed(_)));
}

#[test]
fn guard_proceeds_with_the_rest_when_someone_made_part_of_the_change() {
    let approved = change(Action::Update, vec![min(2, 3), max(5, 8)]);
    let fresh = change(Action::Update, vec![max(5, 8)]);
    assert_eq!(recheck(&approved, fresh.clone()), Recheck::Proceed(fresh));
}

#[test]
fn guard_trips_when_a_changed_field_moved_under_us() {
    let approved = change(Action::Update, vec![min(2, 3)]);
    let fresh = change(Action::Update, vec![min(4, 3)]);
    assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
}

#[test]
fn guard_reports_already_done_when_nothing_is_left() {
    let approved = change(Action::Update, vec![min(2, 3)]);
    let fresh = change(Action::Unchanged, vec![]);
    assert_eq!(recheck(&approved, fresh), Recheck::AlreadyDone);
}

#[test]
fn guard_trips_when_an_updated_object_disappeared() {
    let approved = change(Action::Update, vec![min(2, 3)]);
    let fresh = change(Action::Create, vec![min(2, 3)]);
    assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
}

#[test]
fn guard_trips_when_a_deleted_object_was_recreated() {
    let approved = change(Action::Delete, vec![]);
    let mut fresh = change(Action::Delete, vec![]);
    fresh.write = Some(Write::Delete {
        base: Base::new("9", "u2").unwrap(),
    });
    assert!(matches!(recheck(&approved, fresh), Recheck::Tripped(_)));
}

#[test]
fn a_base_needs_both_a_resource_version_and_a_uid() {
    assert_eq!(Base::new("", "u1"), None);
    assert_eq!(Base::new("1", ""), None);
    assert_eq!(Base::of(&json!({"metadata": {"uid": "u1"}})), None);
    let base = Base::of(&json!({"metadata": {"uid": "u1", "resourceVersion": "7"}})).unwrap();
    assert_eq!((base.resource_version(), base.uid()), ("7", "u1"));
}

fn route(name: &str, action: Action, before: &[&str], after: &[&str]) -> ObjectChange {
    let mut c = ObjectChange::sample(name, action);
    c.route = Some(RouteInfo {
        style: RouteStyle::Gateway,
        identifier: name.into(),
        scopes: Vec::new(),
        paths: after.iter().map(|p| (*p).to_owned()).collect(),
        paths_before: before.iter().map(|p| (*p).to_owned()).collect(),
        foreign: Vec::new(),
    });
    c
}

fn rounds(changes: &[ObjectChange]) -> Vec<Option<usize>> {
    write_order(changes).rounds
}

#[test]
fn writes_without_dependencies_share_the_first_round() {
    let hpa = change(Action::Update, vec![min(2, 3)]);
    let mut unchanged_hpa = hpa.clone();
    unchanged_hpa.write = None;
    let changes = [
        hpa,
        unchanged_hpa,
        route("new", Action::Create, &[], &["/a"]),
        route("grows", Action::Update, &["/b"], &["/b", "/c"]),
        route("restyled", Action::Update, &["/d"], &["/d"]),
        // /e and /f are served by nobody afterwards: nothing to wait for.
        route("renamed", Action::Update, &["/e"], &["/e2"]),
        route("gone", Action::Delete, &["/f"], &[]),
        route("same", Action::Unchanged, &["/g"], &["/g"]),
    ];
    assert_eq!(
        rounds(&changes),
        [
            Some(0),
            None,
            Some(0),
            Some(0),
            Some(0),
            Some(0),
            Some(0),
            None
        ]
    );
    let order = write_order(&changes);
    assert_eq!(order.round_count(), 1);
    assert!(order.unguarded.is_empty());
    assert_eq!(write_order(&[]).round_count(), 0);
}

#[test]
fn a_route_that_stops_serving_a_path_waits_for_its_new_server() {
    // A path moving between groups, and a migration to another kind.
    let changes = [
        route("old", Action::Update, &["/a", "/b"], &["/a"]),
        route("new", Action::Update, &["/c"], &["/b", "/c"]),
        route("ingress", Action::Delete, &["/x"], &[]),
        route("httproute", Action::Create, &[], &["/x"]),
    ];
    assert_eq!(rounds(&changes), [Some(1), Some(0), Some(1), Some(0)]);
    // A route that keeps the path is waited for too (it may change its hosts).
    let changes = [
        route("dropping", Action::Delete, &["/a"], &[]),
        route("keeping", Action::Update, &["/a"], &["/a", "/b"]),
    ];
    assert_eq!(rounds(&changes), [Some(1), Some(0)]);
    // An unchanged route that keeps serving it is not a write: nothing to wait for.
    let changes = [
        route("duplicate", Action::Delete, &["/a"], &[]),
        route("kept", Action::Unchanged, &["/a"], &["/a"]),
    ];
    assert_eq!(rounds(&changes), [Some(0), None]);
}

#[test]
fn chains_take_one_round_per_link() {
    // A gives /p to B, B gives /q to C (a create), C's route is new.
    let changes = [
        route("a", Action::Update, &["/p", "/z"], &["/z"]),
        route("b", Action::Update, &["/q"], &["/p"]),
        route("c", Action::Create, &[], &["/q"]),
        route("d", Action::Delete, &["/z2"], &[]),
    ];
    assert_eq!(rounds(&changes), [Some(2), Some(1), Some(0), Some(0)]);
    let order = write_order(&changes);
    assert_eq!(order.round_count(), 3);
    assert!(order.unguarded.is_empty());
}

#[test]
fn a_cycle_shares_one_round_after_what_it_waits_for_and_names_its_paths() {
    // /p and /q swap between a and b, and a gives /r to c, a new route.
    let changes = [
        route("a", Action::Update, &["/p", "/r"], &["/q"]),
        route("b", Action::Update, &["/q"], &["/p"]),
        route("c", Action::Create, &[], &["/r"]),
        route("d", Action::Delete, &["/p", "/q"], &[]),
    ];
    // a waits for b and c, b for a: {a, b} after c; d waits for a and b.
    assert_eq!(rounds(&changes), [Some(1), Some(1), Some(0), Some(2)]);
    let order = write_order(&changes);
    assert_eq!(order.unguarded, ["/p", "/q"]);
    assert_eq!(order.round_count(), 3);
}

fn policy(name: &str, action: Action) -> ObjectChange {
    let mut c = ObjectChange::sample(name, action);
    c.kind = Kind::SecurityPolicy;
    c
}

fn httproute(name: &str, action: Action, before: &[&str], after: &[&str]) -> ObjectChange {
    let mut c = route(name, action, before, after);
    c.kind = Kind::HttpRoute;
    c
}

#[test]
fn a_guard_lands_before_its_route_serves_and_goes_after_it_stops() {
    // A new scoped route, a route that loses its filter, a route whose policy is only
    // updated, a route deleted with its policy, and one given its filter back.
    let changes = [
        httproute("new", Action::Create, &[], &["/a"]),
        policy("new", Action::Create),
        policy("unfiltered", Action::Create),
        httproute("unfiltered", Action::Update, &["/b"], &["/b"]),
        httproute("kept", Action::Unchanged, &["/c"], &["/c"]),
        policy("kept", Action::Update),
        policy("gone", Action::Delete),
        httproute("gone", Action::Delete, &["/d"], &[]),
        policy("refiltered", Action::Delete),
        httproute("refiltered", Action::Update, &["/e"], &["/e"]),
        // A policy of another kind's name guards nothing.
        policy("ingress", Action::Delete),
        route("ingress", Action::Update, &["/f"], &["/f"]),
    ];
    assert_eq!(
        rounds(&changes),
        [
            Some(1),
            Some(0),
            Some(0),
            Some(1),
            None,
            Some(0),
            Some(1),
            Some(0),
            Some(1),
            Some(0),
            Some(0),
            Some(0)
        ]
    );
    // Chained with the paths: /x moves from a deleted scoped route to a new one.
    let changes = [
        policy("old", Action::Delete),
        httproute("old", Action::Delete, &["/x"], &[]),
        httproute("new", Action::Create, &[], &["/x"]),
        policy("new", Action::Create),
    ];
    assert_eq!(rounds(&changes), [Some(3), Some(2), Some(1), Some(0)]);
    assert!(write_order(&changes).unguarded.is_empty());
}

#[test]
fn long_chains_need_no_recursion() {
    // r0 gives /0 to r1, r1 gives /1 to r2, … : one round per link.
    let n = 2_000;
    let names: Vec<String> = (0..=n).map(|i| format!("/{i}")).collect();
    let changes: Vec<ObjectChange> = (0..=n)
        .map(|i| {
            let before: Vec<&str> = if i < n { vec![&names[i]] } else { vec![] };
            let after: Vec<&str> = if i > 0 { vec![&names[i - 1]] } else { vec![] };
            route(&format!("r{i}"), Action::Update, &before, &after)
        })
        .collect();
    let order = write_order(&changes);
    assert_eq!(order.rounds[n], Some(0));
    assert_eq!(order.rounds[0], Some(n));
    assert_eq!(order.round_count(), n + 1);
}

/// Paths that `c` serves before and after its write (none for what is not a route).
fn served_by(c: &ObjectChange) -> (BTreeSet<String>, BTreeSet<String>) {
    match &c.route {
        Some(r) => (
            r.paths_before.iter().cloned().collect(),
            r.paths.iter().cloned().collect(),
        ),
        None => Default::default(),
    }
}

/// A random plan over the paths /0 … /5: up to 7 routes (Ingresses and HTTPRoutes), each
/// created, updated, deleted or unchanged with any paths before and after (several routes
/// may serve one path, before and after), a SecurityPolicy of some of the HTTPRoutes'
/// names, itself created, updated, deleted or unchanged, and a Deployment update.
fn any_plan() -> impl proptest::strategy::Strategy<Value = Vec<ObjectChange>> {
    use proptest::prelude::*;
    let paths = || proptest::collection::btree_set(0..6u8, 0..4);
    let one = (0..4u8, paths(), paths(), any::<bool>(), 0..5u8).prop_map(
        |(a, before, after, httproute, policy)| {
            let s = |set: &BTreeSet<u8>| -> Vec<String> {
                set.iter().map(|p| format!("/{p}")).collect()
            };
            let (action, before, after) = match a {
                0 => (Action::Create, Vec::new(), s(&after)),
                1 => (Action::Update, s(&before), s(&after)),
                2 => (Action::Delete, s(&before), Vec::new()),
                _ => (Action::Unchanged, s(&before), s(&before)),
            };
            let policy = match policy {
                0 => Some(Action::Create),
                1 => Some(Action::Update),
                2 => Some(Action::Delete),
                3 => Some(Action::Unchanged),
                _ => None,
            };
            (action, before, after, httproute, policy)
        },
    );
    proptest::collection::vec(one, 0..8).prop_map(|routes| {
        let mut changes = vec![change(Action::Update, vec![min(2, 3)])];
        let mut policies = Vec::new();
        for (i, (action, before, after, httproute, policy)) in routes.into_iter().enumerate() {
            let mut c = ObjectChange::sample(&format!("r{i}"), action);
            if httproute {
                c.kind = Kind::HttpRoute;
                if let Some(action) = policy {
                    let mut p = ObjectChange::sample(&format!("r{i}"), action);
                    p.kind = Kind::SecurityPolicy;
                    policies.push(p);
                }
            }
            c.route = Some(RouteInfo {
                style: RouteStyle::Gateway,
                identifier: format!("r{i}"),
                scopes: Vec::new(),
                paths: after,
                paths_before: before,
                foreign: Vec::new(),
            });
            changes.push(c);
        }
        // Policies anywhere in the plan: after their routes and before.
        for (k, p) in policies.into_iter().enumerate() {
            let at = (k * 3) % (changes.len() + 1);
            changes.insert(at, p);
        }
        changes
    })
}

/// Whether write `i` must wait for write `j` by the guard rule: a route written to serve
/// waits for its policy's create or update; a deleted policy waits for its route's write.
fn guard_waits(changes: &[ObjectChange], i: usize, j: usize) -> bool {
    let (a, b) = (&changes[i], &changes[j]);
    if i == j || !a.is_change() || !b.is_change() || a.name != b.name {
        return false;
    }
    let deleted = |c: &ObjectChange| c.action() == Action::Delete;
    (a.kind == Kind::HttpRoute && b.kind == Kind::SecurityPolicy && !deleted(a) && !deleted(b))
        || (a.kind == Kind::SecurityPolicy && b.kind == Kind::HttpRoute && deleted(a))
}

proptest::proptest! {
    /// Written round by round, the writes of a round landing in any order, a path served
    /// before and after the plan is served at every moment, unless it moves in a cycle
    /// (and then a cycle is there); writes without dependencies are in round 0, every other
    /// write comes after what it depends on and no later than needed.
    #[test]
    #[allow(clippy::needless_range_loop)] // i, j are the changes' indices in the plan
    fn a_path_served_before_and_after_is_never_unserved(
        changes in any_plan(),
        shuffle in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 8),
    ) {
        let order = write_order(&changes);
        let n = changes.len();
        let sets: Vec<_> = changes.iter().map(served_by).collect();
        let written: Vec<bool> = changes.iter().map(ObjectChange::is_change).collect();
        // The dependencies, computed here from the definition.
        let depends = |i: usize, j: usize| {
            (i != j
                && written[i]
                && written[j]
                && sets[i].0.difference(&sets[i].1).any(|p| sets[j].1.contains(p)))
                || guard_waits(&changes, i, j)
        };
        let reaches = |from: usize, to: usize| {
            let mut seen = vec![false; n];
            let mut todo = vec![from];
            while let Some(v) = todo.pop() {
                for w in 0..n {
                    if depends(v, w) && !seen[w] {
                        seen[w] = true;
                        todo.push(w);
                    }
                }
            }
            seen[to]
        };
        let in_cycle = |i: usize, j: usize| reaches(i, j) && reaches(j, i);
        for i in 0..n {
            proptest::prop_assert_eq!(order.rounds[i].is_some(), written[i]);
            let deps: Vec<usize> = (0..n).filter(|&j| depends(i, j)).collect();
            if written[i] && deps.is_empty() {
                proptest::prop_assert_eq!(order.rounds[i], Some(0), "{}", i);
            }
            for &j in &deps {
                proptest::prop_assert!(
                    order.rounds[j] < order.rounds[i]
                        || (order.rounds[j] == order.rounds[i] && in_cycle(i, j)),
                    "{} waits for {}: {:?}", i, j, order.rounds
                );
            }
        }
        // No round is empty: none is later than needed.
        for r in 0..order.round_count() {
            proptest::prop_assert!(order.rounds.contains(&Some(r)), "round {} empty", r);
        }
        // Every unguarded path moves inside a cycle.
        for p in &order.unguarded {
            proptest::prop_assert!(
                (0..n).any(|i| (0..n).any(|j| {
                    i != j
                        && sets[i].0.contains(p)
                        && !sets[i].1.contains(p)
                        && sets[j].1.contains(p)
                        && in_cycle(i, j)
                })),
                "{} is not in a cycle", p
            );
        }
        let before: BTreeSet<&String> = sets.iter().flat_map(|s| &s.0).collect();
        let after: BTreeSet<&String> = sets.iter().flat_map(|s| &s.1).collect();
        let keep: Vec<&String> = before
            .intersection(&after)
            .copied()
            .filter(|p| !order.unguarded.contains(p))
            .collect();
        // The worst moment of each round for each path: every write of the round that
        // stops serving it has landed, none that starts to.
        for r in 0..order.round_count() {
            for &p in &keep {
                let served = (0..n).any(|i| match order.rounds[i] {
                    Some(ri) if ri == r => sets[i].0.contains(p) && sets[i].1.contains(p),
                    Some(ri) if ri < r => sets[i].1.contains(p),
                    _ => sets[i].0.contains(p),
                });
                proptest::prop_assert!(served, "{} unserved in round {}: {:?}", p, r, order.rounds);
            }
        }
        // And one concrete run: round by round, each round's writes in a random order.
        let mut landed = vec![false; n];
        let serves = |landed: &[bool], p: &String| {
            (0..n).any(|i| if landed[i] { sets[i].1.contains(p) } else { sets[i].0.contains(p) })
        };
        for r in 0..order.round_count() {
            let mut round: Vec<usize> = (0..n).filter(|&i| order.rounds[i] == Some(r)).collect();
            for (k, ix) in shuffle.iter().enumerate().take(round.len()) {
                let j = k + ix.index(round.len() - k);
                round.swap(k, j);
            }
            for i in round {
                landed[i] = true;
                for &p in &keep {
                    proptest::prop_assert!(serves(&landed, p), "{} unserved after {}", p, i);
                }
                // A route never serves from its write on without the policy it gets, and a
                // policy never goes while its route is as it was.
                for a in 0..n {
                    for b in 0..n {
                        if guard_waits(&changes, a, b) {
                            proptest::prop_assert!(
                                !landed[a] || landed[b],
                                "{} landed before {}: {:?}", a, b, order.rounds
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn summary_reads_like_terraform() {
    let s = Summary {
        create: 1,
        update: 2,
        delete: 1,
        unchanged: 3,
    };
    assert_eq!(
        s.to_string(),
        "Plan: 1 to create, 2 to update, 1 to delete."
    );
    assert_eq!(Summary::default().to_string(), "No changes.");
}
