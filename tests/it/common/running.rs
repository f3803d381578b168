//! The plugin as a running process the test acts on: signals, and waiting for what it says
//! on stderr or for a request the sandbox holds in flight.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sandbox_apiserver::Fault;

use super::{Env, scrub};

/// The Deployment `web` in namespace `shop`.
pub const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
/// Moves `/protected/user` to the public group and so drops the user group: the public
/// Ingress's update is in the first write round (with the Deployment), the user Ingress's
/// delete waits for it (the second round).
pub const DROP_USER: &str =
    "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /protected/user\n";

/// Sends `signal` (`INT`, `TERM`…) to the process `pid`.
pub fn kill(pid: u32, signal: &str) {
    let st = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(st.success(), "kill -{signal} {pid}");
}

/// Polls `done` until it holds (a minute at most).
/// Makes the sandbox hold the next real (not dry-run) write of the Deployment in flight until
/// `env.sb.release_held()`.
pub fn hold_the_deployment_write(env: &Env) {
    env.sb.inject(Fault::Restrict {
        dry_run: false,
        fault: Box::new(Fault::Hold {
            method: Some("PATCH".into()),
            path_prefix: DEPLOY_PATH.into(),
            count: 1,
        }),
    });
}

pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The plugin, running, with its stderr read line by line as it comes.
pub struct Running {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Vec<String>,
}

impl Running {
    /// `kubectl-appupdate --kubeconfig <env's> ARGS`, without stdin.
    pub fn start(env: &Env, args: &[&str]) -> Running {
        Running::with_kubeconfig(&env.kubeconfig, args)
    }

    /// `kubectl-appupdate --kubeconfig KUBECONFIG ARGS`, without stdin.
    pub fn with_kubeconfig(kubeconfig: &std::path::Path, args: &[&str]) -> Running {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
        scrub(&mut cmd);
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("the plugin starts");
        let err = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            stderr: Vec::new(),
        }
    }

    /// An image change and an Ingress update (first write round) and an Ingress delete (second
    /// round, [`DROP_USER`]), started once the real Deployment write is held in flight by the
    /// sandbox (dry runs pass).
    pub fn with_the_deployment_write_held(env: &Env) -> Running {
        let file = env.write_file("endpoints.yaml", DROP_USER);
        hold_the_deployment_write(env);
        let file = file.to_str().expect("a UTF-8 path").to_owned();
        let run = Running::start(
            env,
            &[
                "web",
                "--image",
                "registry.example.com/web:2.0",
                "--endpoints",
                &file,
                "--yes",
            ],
        );
        wait_until("the Deployment write in flight", || env.sb.held() == 1);
        run
    }

    pub fn signal(&self, signal: &str) {
        kill(self.child.id(), signal);
    }

    /// Waits until a line of stderr contains `needle`.
    pub fn wait_for_stderr(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.stderr.iter().any(|l| l.contains(needle)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.stderr.push(line),
                Err(_) => panic!("no {needle:?} on stderr: {:?}", self.stderr),
            }
        }
    }

    /// Waits for the end: the exit code, stdout and stderr.
    pub fn finish(mut self) -> (i32, String, String) {
        let out = self.child.wait_with_output().expect("the plugin ends");
        self.stderr.extend(self.lines.iter());
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            self.stderr.join("\n"),
        )
    }
}
