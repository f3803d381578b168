//! The plugin against a server that negotiates only HTTP/1.1 (ALPN `http/1.1`): the
//! transport falls back from HTTP/2 for every request of the run, concurrent ones included.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use sandbox_apiserver::SandboxOptions;

#[test]
fn a_run_with_a_concurrent_read_round_works_over_http1_only() {
    let env = Env::with_options(SandboxOptions {
        http1_only: true,
        ..Default::default()
    });
    let file = env.write_file(
        "endpoints.yaml",
        "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /catalog\n  - path: /protected/user\n    scopes: [user]\n",
    );
    let o = env.run(&[
        "web",
        "--image",
        "registry.example.com/web:2.0",
        "--min",
        "3",
        "--endpoints",
        file.to_str().unwrap(),
        "--yes",
    ]);
    assert_code(&o, 0);
    assert_eq!(env.image(), "registry.example.com/web:2.0");
    assert_eq!(env.bounds(), (3, 5));
    assert!(
        env.sb
            .requests()
            .iter()
            .all(|r| r.http_version == "HTTP/1.1"),
        "{:?}",
        env.sb.requests()
    );
}
