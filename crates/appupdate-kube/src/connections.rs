//! How many connections a run holds open at once, whatever the number of its clusters.
//!
//! A cluster's client keeps its connection (one HTTP/2 connection; HTTP/1.1 keep-alive to a
//! server without it) in a slot of its transport ([`crate::transport`]): the first request
//! after the slot was emptied opens a new one. A [`Session`] is one stage's work on one cluster
//! — its reads and planning, its dry run, its writes and rollout, its put-back — and the end of
//! the last session open on a cluster closes its connection. Opening a session waits for a
//! permit of the run's one [`ConnectionLimit`], held until that end: so at most that many
//! clusters have a connection open at any moment, and a stage over more clusters than the
//! limit goes through them as permits come back (in the order they were asked for: tokio's
//! semaphore is fair). Sessions nest: a session opened on a cluster that already has one
//! (the put-back inside a cluster's step, one cluster's reads beside its image check) joins
//! it without a permit of its own.
//!
//! A connection closed at the end of a session is dropped by its own task a moment later: the
//! permit is therefore held by the session *and* by every connection opened during it
//! (`Held` in [`crate::transport`]), and goes back only once both are gone. The bound is on
//! open sockets, not only on sessions.
//!
//! A fleet larger than the limit goes through each stage in batches, so most of its clusters
//! connect once per stage. A connection whose last session ended stays open, its permit held,
//! as long as no cluster waits for a permit: a cluster that finds none free closes the
//! connection idle the longest, or — none idle — the next session to end closes its own at
//! once; one connection is closed per cluster that waits ([`Idle`]). The clusters
//! still connected at the end of a stage — its last batch — are where the next stage starts
//! ([`Sessions::connected`]): they go on over the connection they have, a handshake fewer each.
//!
//! What a session does not bound: a request sent on a cluster outside any session opens the
//! connection without a permit, and it stays open until a session on that cluster ends. The
//! plugin opens a session around every stage that talks to a cluster.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most clusters with a connection open at once, shared by every cluster of a run.
#[derive(Clone, Debug)]
pub struct ConnectionLimit {
    permits: Arc<Semaphore>,
    /// The clusters kept connected after their last session, and who waits for a permit.
    idle: Arc<Mutex<Idle>>,
    most: usize,
    /// Connections are closed when their cluster's last session ends. Not when every cluster
    /// of the run fits within the limit: each then keeps its one connection for the whole
    /// run, as a run within the limit always did (no handshake more).
    closes: bool,
}

impl ConnectionLimit {
    /// At most `most` connections at once (at least 1), each closed at the end of its
    /// cluster's last session.
    pub fn new(most: usize) -> ConnectionLimit {
        let most = most.clamp(1, Semaphore::MAX_PERMITS);
        ConnectionLimit {
            permits: Arc::new(Semaphore::new(most)),
            idle: Arc::default(),
            most,
            closes: true,
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// At most `most` connections at once for a run over `clusters` clusters: when they all
    /// fit, each keeps its connection from its first request to the end of the run.
    pub fn for_clusters(most: usize, clusters: usize) -> ConnectionLimit {
        let mut limit = ConnectionLimit::new(most);
        limit.closes = clusters > limit.most;
        limit
    }

    /// No bound (a run over one cluster, a client of its own): nothing is closed.
    pub fn unbounded() -> ConnectionLimit {
        ConnectionLimit::for_clusters(Semaphore::MAX_PERMITS, 0)
    }

    /// Whether a cluster's connection is closed at the end of its last session.
    pub fn closes(&self) -> bool {
        self.closes
    }

    /// The bound.
    pub fn most(&self) -> usize {
        self.most
    }

    /// How many sessions are open (connections counted against the limit) right now.
    pub fn in_use(&self) -> usize {
        self.most - self.permits.available_permits()
    }
}

/// Connections kept open after their cluster's last session, the longest idle first, each
/// with the turn it went idle at (an entry whose cluster was opened again since is stale); and
/// how many clusters wait for a permit that no connection closed for them yet. Locked before
/// any cluster's [`State`].
///
/// Every cluster waiting for a permit has one on its way (a connection closed for it) or is
/// counted in `unserved`, so that the next session to end closes its connection instead of
/// keeping it: a cluster that waits finds no permit free, so every permit is held by an open
/// session, an idle connection (then it closes one) or a connection being closed.
#[derive(Debug, Default)]
struct Idle {
    clusters: std::collections::VecDeque<(u64, std::sync::Weak<Sessions>)>,
    turn: u64,
    unserved: usize,
}

impl Idle {
    /// Closes the connection idle the longest, giving its permit back once its socket is
    /// closed; false when none is idle.
    fn close_one(&mut self) -> bool {
        while let Some((turn, sessions)) = self.clusters.pop_front() {
            let Some(sessions) = sessions.upgrade() else {
                continue;
            };
            let mut state = sessions.state();
            if state.open == 0 && state.idle == Some(turn) {
                state.idle = None;
                state.permit = None;
                sessions.close();
                return true;
            }
        }
        false
    }
}

/// A cluster waiting for a permit: one that gives up takes back its count (or, when a
/// connection was closed for it, another's: that permit goes to the next cluster waiting).
struct Waiting<'a> {
    limit: &'a ConnectionLimit,
    given_up: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.given_up {
            let mut idle = self.limit.idle();
            idle.unserved = idle.unserved.saturating_sub(1);
        }
    }
}

/// Closes a cluster's connection (drops the idle connection pool of its transport); requests
/// in flight keep theirs until they are answered.
pub type Close = Box<dyn Fn() + Send + Sync>;

/// A permit of the limit, shared by a session and the connections opened during it.
pub type Permit = Arc<OwnedSemaphorePermit>;

struct State {
    /// Sessions open on the cluster.
    open: usize,
    /// The permit the first of them took (kept while the connection is idle).
    permit: Option<Permit>,
    /// With no session open, the connection is kept open, since this turn ([`Idle`]).
    idle: Option<u64>,
}

/// The sessions of one cluster (shared by the clones of its connection).
pub struct Sessions {
    state: Mutex<State>,
    /// Held while waiting for a permit, so that two tasks of one cluster take one permit.
    opening: tokio::sync::Mutex<()>,
    limit: ConnectionLimit,
    /// Set once the cluster's transport is built ([`Sessions::closes_with`]).
    close: std::sync::OnceLock<Close>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// The sessions of a cluster, counted against `limit`; its transport says how its
    /// connection is closed ([`Sessions::closes_with`]).
    pub fn new(limit: ConnectionLimit) -> Arc<Sessions> {
        Arc::new(Sessions {
            state: Mutex::new(State {
                open: 0,
                permit: None,
                idle: None,
            }),
            opening: tokio::sync::Mutex::new(()),
            limit,
            close: std::sync::OnceLock::new(),
        })
    }

    /// The limit its sessions count against.
    pub fn limit(&self) -> &ConnectionLimit {
        &self.limit
    }

    /// Sessions of a client that is not ours to close (a test's): unbounded, closing nothing.
    pub fn detached() -> Arc<Sessions> {
        Sessions::new(ConnectionLimit::unbounded())
    }

    /// How the cluster's connection is closed (the first call counts).
    pub fn closes_with(&self, close: Close) {
        let _ = self.close.set(close);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn close(&self) {
        if let Some(close) = self.close.get() {
            close();
        }
    }

    /// Whether the cluster holds a permit now — a session open, or its connection kept open
    /// after one: a stage that starts with these clusters opens no connection for them.
    pub fn connected(&self) -> bool {
        let state = self.state();
        state.open > 0 || state.idle.is_some()
    }

    /// What a connection opened now holds until it is closed: the permit of the session open
    /// on the cluster, where connections are closed at the end of sessions (`None` otherwise,
    /// or outside any session).
    pub fn hold(&self) -> Option<Permit> {
        if !self.limit.closes {
            return None;
        }
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.permit.clone()
    }

    /// Opens a session: at once when the cluster has one open or its connection is kept open
    /// (idle), else once the limit gives a permit — when none is free, closing the connection
    /// idle the longest. Dropping the future while it waits takes nothing.
    pub async fn open(self: &Arc<Self>) -> Session {
        if let Some(joined) = self.join() {
            return joined;
        }
        let _opening = self.opening.lock().await;
        if let Some(joined) = self.join() {
            return joined;
        }
        let limit = &self.limit;
        let free = {
            let mut idle = limit.idle();
            let free = limit.permits.clone().try_acquire_owned().ok();
            if free.is_none() && !idle.close_one() {
                idle.unserved += 1;
            }
            free
        };
        let permit = match free {
            Some(permit) => Some(permit),
            None => {
                let mut waiting = Waiting {
                    limit,
                    given_up: true,
                };
                // The semaphore is never closed.
                let permit = limit.permits.clone().acquire_owned().await.ok();
                waiting.given_up = false;
                permit
            }
        };
        let mut state = self.state();
        state.open += 1;
        state.permit = permit.map(Arc::new);
        Session(self.clone())
    }

    /// A session on a cluster that has one open, or whose connection is idle.
    fn join(self: &Arc<Self>) -> Option<Session> {
        let mut state = self.state();
        (state.open > 0 || state.idle.take().is_some()).then(|| {
            state.open += 1;
            Session(self.clone())
        })
    }
}

/// One stage's work on one cluster; the last one to end closes its connection and gives its
/// permit back.
#[must_use = "the connection may stay open only while the session is held"]
pub struct Session(Arc<Sessions>);

impl Drop for Session {
    fn drop(&mut self) {
        let sessions = &self.0;
        if !sessions.limit.closes {
            let mut state = sessions.state();
            state.open = state.open.saturating_sub(1);
            if state.open == 0 {
                state.permit = None;
            }
            return;
        }
        // The limit's lock first, then the cluster's (as [`Idle::close_one`] takes them).
        let mut idle = sessions.limit.idle();
        let mut state = sessions.state();
        state.open = state.open.saturating_sub(1);
        if state.open > 0 {
            return;
        }
        if state.permit.is_none() {
            sessions.close();
        } else if idle.unserved > 0 {
            // A cluster waits for a permit no connection was closed for yet: closed now.
            idle.unserved -= 1;
            sessions.close();
            state.permit = None;
        } else {
            idle.turn += 1;
            let turn = idle.turn;
            state.idle = Some(turn);
            idle.clusters.push_back((turn, Arc::downgrade(sessions)));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn counted(limit: &ConnectionLimit) -> (Arc<Sessions>, Arc<AtomicUsize>) {
        let closed = Arc::new(AtomicUsize::new(0));
        let c = closed.clone();
        let sessions = Sessions::new(limit.clone());
        sessions.closes_with(Box::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }));
        (sessions, closed)
    }

    #[tokio::test]
    async fn nested_sessions_take_one_permit_and_the_last_one_closes_once_another_waits() {
        let limit = ConnectionLimit::new(1);
        let (a, closed) = counted(&limit);
        let (b, _) = counted(&limit);
        let outer = a.open().await;
        let inner = a.open().await;
        assert_eq!(limit.in_use(), 1);
        drop(outer);
        assert_eq!(closed.load(Ordering::SeqCst), 0);
        assert_eq!(limit.in_use(), 1);
        let mut waiting = Box::pin(b.open());
        assert!(futures::poll!(&mut waiting).is_pending());
        drop(inner);
        assert_eq!(closed.load(Ordering::SeqCst), 1);
        let _b = waiting.await;
        assert_eq!(limit.in_use(), 1);
        assert!(!a.connected());
    }

    #[tokio::test]
    async fn a_connection_stays_open_after_its_session_until_another_cluster_needs_its_permit() {
        let limit = ConnectionLimit::new(2);
        let (a, a_closed) = counted(&limit);
        let (b, b_closed) = counted(&limit);
        let (c, c_closed) = counted(&limit);
        drop(a.open().await);
        drop(b.open().await);
        // Nobody waits: both stay connected, each holding its permit.
        assert_eq!(limit.in_use(), 2);
        assert!(a.connected() && b.connected() && !c.connected());
        assert_eq!(
            a_closed.load(Ordering::SeqCst) + b_closed.load(Ordering::SeqCst),
            0
        );
        // A session on an idle cluster goes on over its connection: no permit more.
        let again = b.open().await;
        assert_eq!(limit.in_use(), 2);
        drop(again);
        // A cluster that needs a permit closes the connection idle the longest (a's: b was
        // opened again since).
        let _c = c.open().await;
        assert_eq!(a_closed.load(Ordering::SeqCst), 1);
        assert_eq!(b_closed.load(Ordering::SeqCst), 0);
        assert!(!a.connected() && b.connected() && c.connected());
        assert_eq!(limit.in_use(), 2);
        // Its next session waits for a permit like any other cluster's, closing b's.
        let _a = a.open().await;
        assert_eq!(b_closed.load(Ordering::SeqCst), 1);
        assert_eq!(c_closed.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn one_connection_is_closed_per_cluster_waiting_the_others_stay_open() {
        let limit = ConnectionLimit::new(2);
        let (a, a_closed) = counted(&limit);
        let (b, b_closed) = counted(&limit);
        let (c, _) = counted(&limit);
        let (in_a, in_b) = (a.open().await, b.open().await);
        let mut waiting = Box::pin(c.open());
        assert!(futures::poll!(&mut waiting).is_pending());
        // a's end closes its connection for c; b's, which ends before c took a's permit, is
        // kept: nobody else waits.
        drop(in_a);
        drop(in_b);
        assert_eq!(a_closed.load(Ordering::SeqCst), 1);
        assert_eq!(b_closed.load(Ordering::SeqCst), 0);
        let _c = waiting.await;
        assert!(b.connected() && c.connected() && !a.connected());
        assert_eq!(limit.in_use(), 2);
    }

    #[tokio::test]
    async fn a_cluster_dropped_while_idle_gives_its_permit_back() {
        let limit = ConnectionLimit::new(1);
        let (a, _) = counted(&limit);
        let (b, _) = counted(&limit);
        drop(a.open().await);
        assert_eq!(limit.in_use(), 1);
        drop(a);
        assert_eq!(limit.in_use(), 0);
        let _b = b.open().await;
        assert_eq!(limit.in_use(), 1);
    }

    #[tokio::test]
    async fn a_cluster_waits_for_a_permit_until_another_closes() {
        let limit = ConnectionLimit::new(1);
        let (a, a_closed) = counted(&limit);
        let (b, _) = counted(&limit);
        let held = a.open().await;
        let mut waiting = Box::pin(b.open());
        assert!(futures::poll!(&mut waiting).is_pending());
        drop(held);
        assert_eq!(a_closed.load(Ordering::SeqCst), 1);
        let _b = waiting.await;
        assert_eq!(limit.in_use(), 1);
    }

    #[tokio::test]
    async fn a_connection_opened_in_a_session_holds_its_permit_until_it_is_closed() {
        let limit = ConnectionLimit::new(1);
        let (a, _) = counted(&limit);
        let (b, _) = counted(&limit);
        let session = a.open().await;
        let connection = a.hold();
        assert!(connection.is_some());
        drop(session);
        // Closed, but its socket not dropped yet: the permit is still out.
        let mut waiting = Box::pin(b.open());
        assert!(futures::poll!(&mut waiting).is_pending());
        drop(connection);
        let _b = waiting.await;
        assert_eq!(limit.in_use(), 1);
        // Outside a session, or where connections stay open, nothing is held.
        assert!(a.hold().is_none());
        let kept = ConnectionLimit::for_clusters(2, 2);
        let (c, _) = counted(&kept);
        let _c = c.open().await;
        assert!(c.hold().is_none());
    }

    #[tokio::test]
    async fn a_run_whose_clusters_all_fit_keeps_their_connections_open() {
        let limit = ConnectionLimit::for_clusters(2, 2);
        let (a, a_closed) = counted(&limit);
        let (b, b_closed) = counted(&limit);
        drop((a.open().await, b.open().await));
        let _again = a.open().await;
        assert_eq!(a_closed.load(Ordering::SeqCst), 0);
        assert_eq!(b_closed.load(Ordering::SeqCst), 0);
        assert!(ConnectionLimit::for_clusters(2, 3).closes());
        assert!(!ConnectionLimit::unbounded().closes());
    }

    #[tokio::test]
    async fn a_wait_given_up_takes_nothing() {
        let limit = ConnectionLimit::new(1);
        let (a, _) = counted(&limit);
        let (b, b_closed) = counted(&limit);
        let held = a.open().await;
        {
            let mut waiting = Box::pin(b.open());
            assert!(futures::poll!(&mut waiting).is_pending());
        }
        drop(held);
        // Nobody waits any more: a's connection stays open, b holds nothing.
        assert_eq!(limit.in_use(), 1);
        assert!(a.connected() && !b.connected());
        assert_eq!(b_closed.load(Ordering::SeqCst), 0);
        let _b = b.open().await;
        assert_eq!(limit.in_use(), 1);
        assert!(!a.connected());
    }
}
