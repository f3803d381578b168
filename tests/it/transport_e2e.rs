//! The transport: against a TLS server that offers HTTP/2 (the sandbox does, as kube-apiserver
//! does), a whole run — the concurrent reads, the concurrent dry runs and every write round —
//! travels as streams of one HTTP/2 connection: one TCP and one TLS handshake, however many
//! objects change at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;

#[test]
fn a_whole_run_uses_one_http2_connection() {
    let env = Env::new();
    let endpoints = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /v2\n  - path: /protected/user\n    scopes: [user]\n  - path: /admin\n    scopes: [admin]\n  - path: /billing\n    scopes: [billing]\n",
    );
    env.sb.clear_requests();
    let o = env.run(&[
        "web",
        "--image",
        "registry.example.com/web:2.0",
        "--min",
        "3",
        "--max",
        "9",
        "--endpoints",
        endpoints.to_str().unwrap(),
        "--yes",
    ]);
    assert_code(&o, 0);
    let log = env.sb.requests();
    // 4 reads, then a dry run and a write for each of the 6 changes (Deployment, HPA, public
    // group update, 2 creates… whatever the plan is, every request shares the connection).
    assert!(log.len() >= 8, "{log:?}");
    assert!(
        log.iter().all(|r| r.http_version == "HTTP/2.0"),
        "{:?}",
        log.iter().map(|r| &r.http_version).collect::<Vec<_>>()
    );
    let first = log[0].connection_id;
    assert!(log.iter().all(|r| r.connection_id == first), "{log:?}");
    assert_eq!(env.sb.counters().connections, 1);
    assert_eq!(env.image(), "registry.example.com/web:2.0");
    assert_eq!(env.bounds(), (3, 9));
}
