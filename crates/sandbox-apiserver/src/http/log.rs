//! The request log and counters: one entry per request (faulted ones marked), optionally
//! mirrored as JSON lines to a sink, and counted by method, status, writes, conflicts, faults,
//! watches and connections.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// One request as the sandbox saw it. Printed as one JSON object per line by `--request-log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// 1, 2, 3… in arrival order.
    pub seq: u64,
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query, decoded (`labelSelector=app=web&watch=true`); empty when none.
    pub query: String,
    /// `admin`, `readonly`, `noperm`, `invalid-token`, `system:anonymous`.
    pub user: String,
    /// `dryRun=All` was given.
    pub dry_run: bool,
    /// HTTP status sent (0: none, the connection was dropped or the request hung).
    pub status: u16,
    /// The Status `reason` of an error response.
    pub reason: Option<String>,
    /// The fault that shaped this response, if any (`conflict`, `status`, `latency`,
    /// `competing-write`, `competing-delete`, `competing-recreate`, `competing-create`,
    /// `competing-write-failed`, `drop-connection`, `drop-mid-response`, `hang`, `hold`).
    pub fault: Option<String>,
    /// Milliseconds since the sandbox started.
    pub started_ms: f64,
    pub duration_ms: f64,
    /// The TCP connection (1, 2, …): how many connections/TLS handshakes a client made.
    pub connection_id: u64,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub http_version: String,
    pub user_agent: String,
    /// The user the request acted as through `Impersonate-User`, when it impersonated one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonated: Option<String>,
}

/// Request counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub requests: u64,
    pub by_method: BTreeMap<String, u64>,
    pub by_status: BTreeMap<u16, u64>,
    /// POST/PUT/PATCH/DELETE requests, dry runs included.
    pub writes: u64,
    pub dry_run_writes: u64,
    /// 409 responses with reason Conflict (injected or real).
    pub conflicts: u64,
    pub faults: u64,
    pub watches: u64,
    /// TCP connections accepted.
    pub connections: u64,
}

/// The log, the counters and where the lines also go.
pub struct RequestLog {
    state: Mutex<LogState>,
    sink: Option<Mutex<Box<dyn Write + Send>>>,
    seq: AtomicU64,
    conn_seq: AtomicU64,
    started: Instant,
}

#[derive(Default)]
struct LogState {
    entries: Vec<LoggedRequest>,
    counters: Counters,
}

impl RequestLog {
    /// An empty log; `sink` also gets each entry as one JSON line.
    pub fn new(sink: Option<Box<dyn Write + Send>>) -> Self {
        RequestLog {
            state: Mutex::new(LogState::default()),
            sink: sink.map(Mutex::new),
            seq: AtomicU64::new(0),
            conn_seq: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    /// Number a new connection (1, 2, …) and count it.
    pub fn next_connection(&self) -> u64 {
        let id = self.conn_seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.state.lock().counters.connections += 1;
        id
    }

    /// Number a new request (1, 2, …).
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Milliseconds from the start of the sandbox to `t`.
    pub fn elapsed_ms(&self, t: Instant) -> f64 {
        t.duration_since(self.started).as_secs_f64() * 1000.0
    }

    /// Record a finished request (`started`: when it arrived).
    pub fn record(&self, mut entry: LoggedRequest, started: Instant) {
        entry.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        {
            let mut log = self.state.lock();
            let c = &mut log.counters;
            c.requests += 1;
            *c.by_method.entry(entry.method.clone()).or_default() += 1;
            *c.by_status.entry(entry.status).or_default() += 1;
            if matches!(entry.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE") {
                c.writes += 1;
                if entry.dry_run {
                    c.dry_run_writes += 1;
                }
            }
            if entry.status == 409 && entry.reason.as_deref() == Some("Conflict") {
                c.conflicts += 1;
            }
            if entry.fault.is_some() {
                c.faults += 1;
            }
            if entry
                .query
                .split('&')
                .any(|p| p == "watch=true" || p == "watch=1")
            {
                c.watches += 1;
            }
            log.entries.push(entry.clone());
        }
        if let Some(sink) = &self.sink
            && let Ok(line) = serde_json::to_string(&entry)
        {
            let mut w = sink.lock();
            let _ = writeln!(w, "{line}");
            let _ = w.flush();
        }
    }

    /// The entries after `since` (0: all).
    pub fn entries_since(&self, since: u64) -> Vec<LoggedRequest> {
        self.state
            .lock()
            .entries
            .iter()
            .filter(|e| e.seq > since)
            .cloned()
            .collect()
    }

    /// The counters now.
    pub fn counters(&self) -> Counters {
        self.state.lock().counters.clone()
    }

    /// Forget the entries and reset the counters.
    pub fn clear(&self) {
        let mut log = self.state.lock();
        log.entries.clear();
        log.counters = Counters::default();
    }
}
