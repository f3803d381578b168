//! Request accounting from the sandbox's request log: how many requests a run sent, of which
//! kind, over how many connections, and in how many sequential rounds.
//!
//! # Rounds
//!
//! Requests that overlap in time form one round: sorted by arrival, a request joins the current
//! round when it reaches the server before the round's last answer left it plus a tolerance, and
//! starts a new round otherwise. The tolerance is RTT/2: requests a client sends together can
//! arrive a few milliseconds apart (client CPU, the server working through a burst), while a
//! request that needed an answer first arrives at least a full RTT after that answer left. So
//! the rounds are the number of times the run waited for the network, which is what its wall
//! time pays RTT for. Meaningful only with RTT > 0 (the benchmark reports it from its largest
//! RTT).

use sandbox_apiserver::LoggedRequest;

/// What one kind of request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// `/version`, `/api`, `/apis`, `/openapi/…`: what kubectl asks before it knows a resource.
    Discovery,
    /// GET / LIST of an object.
    Read,
    /// A write with `dryRun=All`.
    DryRun,
    /// POST / PUT / PATCH / DELETE.
    Write,
    /// Anything else (watches…).
    Other,
}

pub fn classify(r: &LoggedRequest) -> Class {
    let p = r.path.as_str();
    let discovery = p == "/version"
        || p == "/api"
        || p == "/apis"
        || p.starts_with("/openapi")
        || (p.starts_with("/apis/") && p.split('/').filter(|s| !s.is_empty()).count() <= 3)
        || p == "/api/v1";
    if discovery {
        return Class::Discovery;
    }
    if r.query
        .split('&')
        .any(|q| q == "watch=true" || q == "watch=1")
    {
        return Class::Other;
    }
    // Asking who we are (for the history record) is a POST that writes nothing.
    if r.path.ends_with("/selfsubjectreviews") {
        return Class::Other;
    }
    match r.method.as_str() {
        "GET" => Class::Read,
        "POST" | "PUT" | "PATCH" | "DELETE" if r.dry_run => Class::DryRun,
        "POST" | "PUT" | "PATCH" | "DELETE" => Class::Write,
        _ => Class::Other,
    }
}

/// The accounting of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accounting {
    pub requests: usize,
    pub discovery: usize,
    pub reads: usize,
    pub dry_runs: usize,
    pub writes: usize,
    pub other: usize,
    pub rounds: usize,
    /// Distinct connections that carried a request.
    pub connections_used: usize,
    /// HTTP versions seen, sorted, deduplicated (`HTTP/1.1`, `HTTP/2.0`).
    pub http_versions: Vec<String>,
    /// Requests answered 409 Conflict (a re-read after one is not redundant).
    pub conflicts: usize,
}

/// Accounts for `log` (one run's requests) with the proxy's `rtt_ms`.
pub fn account(log: &[LoggedRequest], rtt_ms: f64) -> Accounting {
    let mut a = Accounting {
        requests: log.len(),
        rounds: rounds(log, rtt_ms / 2.0),
        ..Accounting::default()
    };
    let mut conns: Vec<u64> = Vec::new();
    for r in log {
        match classify(r) {
            Class::Discovery => a.discovery += 1,
            Class::Read => a.reads += 1,
            Class::DryRun => a.dry_runs += 1,
            Class::Write => a.writes += 1,
            Class::Other => a.other += 1,
        }
        if !conns.contains(&r.connection_id) {
            conns.push(r.connection_id);
        }
        if !a.http_versions.contains(&r.http_version) {
            a.http_versions.push(r.http_version.clone());
        }
        if r.status == 409 && r.reason.as_deref() == Some("Conflict") {
            a.conflicts += 1;
        }
    }
    a.http_versions.sort();
    a.connections_used = conns.len();
    a
}

/// The number of sequential rounds in `log` (see the module docs); `tolerance_ms` is how long
/// after the current round's last answer a request may still arrive and belong to it.
pub fn rounds(log: &[LoggedRequest], tolerance_ms: f64) -> usize {
    let mut order: Vec<&LoggedRequest> = log.iter().collect();
    order.sort_by(|a, b| a.started_ms.total_cmp(&b.started_ms));
    let mut rounds = 0;
    let mut round_end = f64::NEG_INFINITY;
    for r in order {
        if r.started_ms >= round_end + tolerance_ms {
            rounds += 1;
            round_end = r.started_ms + r.duration_ms;
        } else {
            round_end = round_end.max(r.started_ms + r.duration_ms);
        }
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, path: &str, started_ms: f64, duration_ms: f64) -> LoggedRequest {
        LoggedRequest {
            seq: 0,
            method: method.into(),
            path: path.into(),
            query: String::new(),
            user: "admin".into(),
            dry_run: false,
            status: 200,
            reason: None,
            fault: None,
            started_ms,
            duration_ms,
            connection_id: 1,
            http_version: "HTTP/2.0".into(),
            user_agent: String::new(),
            impersonated: None,
        }
    }

    #[test]
    fn concurrent_requests_share_a_round_and_dependent_ones_start_a_new_one() {
        let d = "/apis/apps/v1/namespaces/demo/deployments/web";
        let log = vec![
            req("GET", d, 100.0, 1.0),
            req("GET", d, 101.5, 0.5), // 0.5 ms after the first answer: concurrent
            req("PATCH", d, 122.0, 1.0), // a full RTT (20 ms) later: depends
            req("PATCH", d, 143.0, 1.0),
        ];
        assert_eq!(rounds(&log, 10.0), 3);
    }

    #[test]
    fn a_burst_the_server_works_through_one_by_one_is_one_round() {
        let d = "/apis/networking.k8s.io/v1/namespaces/demo/ingresses";
        // 30 requests sent together, served one after another over 30 ms.
        let mut log: Vec<LoggedRequest> = (0..30)
            .map(|i| req("PATCH", d, 100.0 + f64::from(i), 1.0))
            .collect();
        log.push(req("PATCH", d, 151.0, 1.0)); // after the burst's last answer + RTT
        assert_eq!(rounds(&log, 10.0), 2);
    }

    #[test]
    fn no_requests_no_rounds() {
        assert_eq!(rounds(&[], 10.0), 0);
    }

    #[test]
    fn discovery_reads_and_writes_are_told_apart() {
        let mut dry = req(
            "PATCH",
            "/apis/apps/v1/namespaces/demo/deployments/web",
            0.0,
            0.0,
        );
        dry.dry_run = true;
        let log = vec![
            req("GET", "/apis", 0.0, 1.0),
            req("GET", "/apis/networking.k8s.io/v1", 0.0, 1.0),
            req("GET", "/openapi/v3", 0.0, 1.0),
            req(
                "GET",
                "/apis/networking.k8s.io/v1/namespaces/demo/ingresses",
                0.0,
                1.0,
            ),
            dry,
            req(
                "DELETE",
                "/apis/networking.k8s.io/v1/namespaces/demo/ingresses/x",
                0.0,
                1.0,
            ),
        ];
        let a = account(&log, 20.0);
        assert_eq!(
            (
                a.discovery,
                a.reads,
                a.dry_runs,
                a.writes,
                a.connections_used
            ),
            (3, 1, 1, 1, 1)
        );
        assert_eq!(a.http_versions, vec!["HTTP/2.0".to_owned()]);
    }
}
