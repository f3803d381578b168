//! The write order of a plan: which write waits for which, so a path served before and after
//! a run is served at every moment of it ([`write_order`]).

use std::collections::{BTreeMap, BTreeSet};

use super::{Action, Kind, ObjectChange};

/// The write order of a plan: the round (0 first) in which each change is written, `None` for
/// what is not written, and the paths whose removal could not be ordered after their new
/// server. Computed by [`write_order`], the one place the order is decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOrder {
    /// One entry per change, in the order the changes were given.
    pub rounds: Vec<Option<usize>>,
    /// Endpoint paths that move between routes in a cycle (for example two paths swapping
    /// scope groups): each such route both gives a path to and takes one from another route of
    /// the cycle, so with one write per route one of them is unserved between the cycle's
    /// writes, which share a round. Sorted; empty for almost every plan.
    pub unguarded: Vec<String>,
}

impl WriteOrder {
    /// How many write rounds there are (the highest round plus one; 0 when nothing is written).
    pub fn round_count(&self) -> usize {
        self.rounds.iter().flatten().max().map_or(0, |r| r + 1)
    }
}

/// The write order, from the dependencies between the writes. Rounds run one after the other;
/// the writes of one round run concurrently, in any order.
///
/// A route write that stops serving an endpoint path (an update dropping it, or a delete)
/// depends on every other write after which that path is served (a create, or an update that
/// adds it or keeps it — a route that keeps a path may still change the hosts it serves it
/// on), in any kind and style. Each write goes in the first round after all the writes it
/// depends on; a write without dependencies — the Deployment, the HPA, a create, an update
/// that adds or changes paths in place (a change of style, of the auth service) and a route
/// whose dropped paths nobody serves afterwards — goes in round 0.
///
/// A write that guards a route ([`Kind::guards`]: a SecurityPolicy, the HTTPRoute of its name)
/// is ordered with that route: a route written to serve (a create or an update) waits for its
/// guard's create or update, and a guard deleted waits for its route's write (the route deleted,
/// or given its own auth back). So a scoped path is never reachable without its policy.
///
/// So a path that is served before and after the run is served at every moment of it: it is
/// served by its new route before any route that served it stops. The one exception is a
/// cycle — route A gives a path to route B while B gives one to A (two paths swapping scope
/// groups), or longer rings: no order of single writes keeps both served, so the writes of a
/// cycle share one round (after everything they depend on outside it) and its paths are
/// listed in [`WriteOrder::unguarded`].
pub fn write_order<'a>(changes: impl IntoIterator<Item = &'a ObjectChange>) -> WriteOrder {
    let changes: Vec<&ObjectChange> = changes.into_iter().collect();
    let n = changes.len();
    let written: Vec<bool> = changes.iter().map(|c| c.is_change()).collect();
    fn paths(c: &ObjectChange) -> (BTreeSet<&str>, BTreeSet<&str>) {
        match (&c.route, c.kind.is_route()) {
            (Some(r), true) => (
                r.paths_before.iter().map(String::as_str).collect(),
                if c.action() == Action::Delete {
                    BTreeSet::new()
                } else {
                    r.paths.iter().map(String::as_str).collect()
                },
            ),
            _ => (BTreeSet::new(), BTreeSet::new()),
        }
    }
    // Only a write's paths are read (a large plan is mostly unchanged routes).
    let sets: Vec<_> = changes
        .iter()
        .zip(&written)
        .map(|(c, &w)| if w { paths(c) } else { Default::default() })
        .collect();
    // Path → the writes after which it is served.
    let mut servers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (_, after)) in sets.iter().enumerate() {
        if written[i] {
            for p in after {
                servers.entry(p).or_default().push(i);
            }
        }
    }
    // deps[i]: the writes i waits for, each with a path that makes it wait.
    let mut deps: Vec<Vec<(usize, &str)>> = vec![Vec::new(); n];
    for (i, (before, after)) in sets.iter().enumerate() {
        if !written[i] {
            continue;
        }
        for p in before.difference(after) {
            for &j in servers.get(p).into_iter().flatten() {
                if j != i && !deps[i].iter().any(|&(k, _)| k == j) {
                    deps[i].push((j, p));
                }
            }
        }
    }
    // Guards and the routes they guard, by kind, namespace and name.
    let mut by_name: BTreeMap<(Kind, &str, &str), usize> = BTreeMap::new();
    for (i, c) in changes.iter().enumerate() {
        if written[i] {
            by_name.insert((c.kind, c.namespace.as_str(), c.name.as_str()), i);
        }
    }
    for (i, c) in changes.iter().enumerate() {
        let Some(guarded) = c.kind.guards().filter(|_| written[i]) else {
            continue;
        };
        let Some(&j) = by_name.get(&(guarded, c.namespace.as_str(), c.name.as_str())) else {
            continue;
        };
        if c.action() == Action::Delete {
            deps[i].push((j, ""));
        } else if changes[j].action() != Action::Delete {
            deps[j].push((i, ""));
        }
    }
    let (component, order) = strongly_connected(&deps);
    // Components come sinks first: every component a write depends on has its round already.
    let mut component_round: Vec<usize> = vec![0; order.len()];
    for (c, members) in order.iter().enumerate() {
        let round = members
            .iter()
            .flat_map(|&i| deps[i].iter())
            .filter(|&&(j, _)| component[j] != c)
            .map(|&(j, _)| component_round[component[j]] + 1)
            .max()
            .unwrap_or(0);
        component_round[c] = round;
    }
    let rounds = (0..n)
        .map(|i| written[i].then(|| component_round[component[i]]))
        .collect();
    // Every path a write of a cycle stops serving and another write of the same cycle starts
    // to (`deps` keeps one path per pair of writes; a pair may exchange several).
    let mut unguarded: BTreeSet<String> = BTreeSet::new();
    for (i, (before, after)) in sets.iter().enumerate() {
        if !written[i] || !deps[i].iter().any(|&(j, _)| component[j] == component[i]) {
            continue;
        }
        for p in before.difference(after) {
            if servers
                .get(p)
                .into_iter()
                .flatten()
                .any(|&j| j != i && component[j] == component[i])
            {
                unguarded.insert((*p).to_owned());
            }
        }
    }
    WriteOrder {
        rounds,
        unguarded: unguarded.into_iter().collect(),
    }
}

/// Tarjan's strongly connected components of the graph `edges` (node → its successors, each
/// with a label), without recursion: the component of every node, and each component's
/// members. Components are listed sinks first: after every component reachable from them.
fn strongly_connected<T>(edges: &[Vec<(usize, T)>]) -> (Vec<usize>, Vec<Vec<usize>>) {
    const NONE: usize = usize::MAX;
    let n = edges.len();
    let mut index = vec![NONE; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut component = vec![NONE; n];
    let mut components: Vec<Vec<usize>> = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        // (node, how many of its edges have been followed)
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut e)) = work.last_mut() {
            if let Some(&(w, _)) = edges[v].get(*e) {
                *e += 1;
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let c = components.len();
                let mut members = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component[w] = c;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(members);
            }
        }
    }
    (component, components)
}

/// Where a change is listed among the routes of a plan ([`Plan::new`](super::Plan::new)): creates, updates that
/// add or change paths, updates that only take paths away, deletes; unchanged ones last.
pub(super) fn listing_rank(change: &ObjectChange) -> u8 {
    match change.action() {
        Action::Unchanged => 4,
        Action::Create => 0,
        Action::Update => match &change.route {
            Some(r) if r.only_removes_paths() => 2,
            _ => 1,
        },
        Action::Delete => 3,
    }
}
