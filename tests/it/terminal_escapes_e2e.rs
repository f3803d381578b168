//! Nothing a writer in the cluster, a file or the environment controls reaches the terminal
//! raw.
//!
//! The injection corpus: terminal escape sequences (OSC that sets the title, BEL, CSI that
//! clears the screen, the C1 CSI), a right-to-left override, a left-to-right isolate and a
//! zero-width space, placed in every value someone else can write — the Deployment's image, a
//! managed Ingress's snippet annotation and a path someone added to it, a Progressing
//! condition's message during `--wait`, the Status of a refusing server or admission webhook
//! (on a read, the dry run and the real write; with its reason), the server's `Warning`
//! headers, the endpoints file (its content and its name), the kubeconfig's context, cluster
//! and user names, `KUBECONFIG`, and flag values — then run through every command and output
//! format (`-o diff|json|yaml`, `--dry-run`, apply, a guard trip, `--wait`, `-v`, errors),
//! with colour on and off. stdout and stderr must hold no escape sequence other than our SGR
//! colour codes (none at all with colour off), no other control character and no bidi or
//! invisible formatting character; and the value must be visible, escaped (`\e`, `\x07`,
//! `\u{202e}`). `-o json` and `-o yaml` must carry the exact bytes.
//!
//! The sandbox answers with its own Status texts and sends no warnings of its choosing, so a
//! small server in front of it (`Front`) plays the webhook: it forwards every request and adds
//! a `Warning` header to every answer, or answers a chosen request with a chosen Status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use appupdate_model::text;
use common::front::{Front, Refusal};
use common::running::{DEPLOY_PATH, Running};
use common::*;
use sandbox_apiserver::{Fault, Sandbox, SandboxOptions, Trigger};
use serde_json::{Value, json};

/// Everything a terminal obeys or hides: OSC 0 (set the title) ended by BEL, CSI 2J (clear the
/// screen), the C1 CSI, a right-to-left override, a left-to-right isolate, a zero-width space.
const PAYLOAD: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}\u{2066}\u{200b}";
/// The same, as it must be shown.
const SHOWN: &str = "\\e]0;pwned\\x07\\e[2J\\u{9b}31m\\u{202e}\\u{2066}\\u{200b}";
/// What an HTTP header can carry of it: no C0 control, but C1, bidi and zero-width characters
/// as UTF-8.
const HEADER_PAYLOAD: &str = "\u{9b}2J\u{202e}reversed\u{200b}";
const HEADER_SHOWN: &str = "\\u{9b}2J\\u{202e}reversed\\u{200b}";

const NEW_IMAGE: &str = "registry.example.com/web:2.0";
const PUBLIC: &str = "web-e3b0c44298fc1c14";

fn hostile(base: &str) -> String {
    format!("{base}{PAYLOAD}")
}

fn shown(base: &str) -> String {
    format!("{base}{SHOWN}")
}

// ---- the oracle ----

/// Panics unless `out` holds nothing a terminal would obey or hide: line feeds, and with
/// `color` the SGR sequences `ESC [ digits;… m`, are the only exceptions. Written
/// independently of the plugin's own escaping.
#[track_caller]
fn assert_clean(out: &str, color: bool, what: &str) {
    let chars: Vec<char> = out.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\u{1b}' && color && chars.get(i + 1) == Some(&'[') {
            let mut j = i + 2;
            while j < chars.len() && (chars[j].is_ascii_digit() || chars[j] == ';') {
                j += 1;
            }
            if chars.get(j) == Some(&'m') {
                i = j + 1;
                continue;
            }
        }
        let forbidden = (c.is_control() && c != '\n')
            || matches!(u32::from(c),
                0xAD | 0x61C | 0x180E | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F
                | 0xFE00..=0xFE0F | 0xFEFF | 0xFFF9..=0xFFFB | 0xE0000..=0xE0FFF);
        assert!(
            !forbidden,
            "{what}: U+{:04X} at char {i} of {:?}",
            u32::from(c),
            text::escape(out)
        );
        i += 1;
    }
}

/// `out` without our colour codes, to look for text in.
fn plain(out: &str) -> String {
    console::strip_ansi_codes(out).into_owned()
}

#[track_caller]
fn assert_shows(out: &str, needle: &str, what: &str) {
    assert!(
        plain(out).contains(needle),
        "{what}: {needle:?} not in\n{}",
        text::escape_lines(out)
    );
}

// ---- the server in front of the sandbox ----

// ---- a cluster full of hostile values ----

/// The demo application, with hostile values wherever someone else can write them, behind a
/// [`Front`] that sends a hostile warning with every answer, and a kubeconfig whose context,
/// cluster and user names are hostile.
struct World {
    env: Env,
    front: Front,
    context: String,
    image: String,
    path: String,
    snippet: String,
    endpoints: String,
}

fn world_with(opts: SandboxOptions) -> World {
    let sb = Sandbox::start(SandboxOptions { tls: false, ..opts }).unwrap();
    sb.seed_demo_app(NS, APP).unwrap();
    let image = hostile("nginx:1.25");
    sb.update(DEPLOY_PATH, |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
    })
    .unwrap();
    // Someone else added a path to a managed Ingress and a line to its snippet.
    let path = hostile("/web/added");
    let snippet = format!("# {PAYLOAD}\nrewrite ^/web/(.*)$ /$1 break;\n");
    sb.update(&ingress_path(PUBLIC), |i| {
        let paths = i["spec"]["rules"][0]["http"]["paths"]
            .as_array_mut()
            .unwrap();
        let mut added = paths[0].clone();
        added["path"] = json!(path);
        paths.push(added);
        i["metadata"]["annotations"]["nginx.ingress.kubernetes.io/configuration-snippet"] =
            json!(snippet);
    })
    .unwrap();
    let front = Front::start(sb.addr());
    front.warn(&format!("spec: {HEADER_PAYLOAD}"));

    let dir = tempfile::tempdir().unwrap();
    let context = hostile("ctx");
    let kubeconfig = dir.path().join("kubeconfig");
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": hostile("cluster"), "cluster": {"server": format!("http://{}", front.addr)}}],
        "users": [{"name": hostile("user"), "user": {"token": sb.token(sandbox_apiserver::Identity::Admin)}}],
        "contexts": [{"name": context, "context": {"cluster": hostile("cluster"), "user": hostile("user"), "namespace": NS}}],
        "current-context": context,
    });
    std::fs::write(&kubeconfig, ascii_json(&config)).unwrap();
    let endpoints = dir.path().join("endpoints.yaml");
    std::fs::write(
        &endpoints,
        "endpoints:\n  - path: /health\n  - path: /unprotected\n  - path: /protected/user\n    scopes: [user]\n",
    )
    .unwrap();
    let endpoints = endpoints.to_str().unwrap().to_owned();
    World {
        env: Env {
            sb,
            dir,
            kubeconfig,
        },
        front,
        context,
        image,
        path,
        snippet,
        endpoints,
    }
}

/// `value` as JSON (which is YAML) with every non-ASCII character as a JSON escape: a YAML
/// reader refuses a raw C1 control.
fn ascii_json(value: &Value) -> String {
    serde_json::to_string_pretty(value)
        .unwrap()
        .chars()
        .map(|c| match c {
            c if c.is_ascii() => c.to_string(),
            c => c
                .encode_utf16(&mut [0; 2])
                .iter()
                .map(|u| format!("\\u{u:04x}"))
                .collect(),
        })
        .collect()
}

fn world() -> World {
    world_with(SandboxOptions::default())
}

impl World {
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let mut c = self.env.cmd();
        c.args(args);
        let o = c.output().unwrap();
        (code(&o), stdout(&o), stderr(&o))
    }
}

/// `--color never` and `--color always`.
const COLORS: [(&str, bool); 2] = [("never", false), ("always", true)];

// ---- plan, apply and report, in every format ----

#[test]
fn the_report_line_of_the_issue_comes_out_escaped() {
    let w = world();
    let (code, out, err) = w.run(&["web", "--image", NEW_IMAGE, "--yes", "--color", "never"]);
    assert_eq!(code, 0, "{err}");
    assert_clean(&out, false, "stdout");
    assert_clean(&err, false, "stderr");
    assert!(
        out.contains(&format!(
            "deployment.apps/web updated (image nginx:1.25{SHOWN} → {NEW_IMAGE})\n"
        )),
        "{}",
        text::escape_lines(&out)
    );
    assert_eq!(w.env.image(), NEW_IMAGE);
}

#[test]
fn plan_and_apply_show_every_hostile_value_escaped_in_every_format_and_colour() {
    for (color, colored) in COLORS {
        for output in ["diff", "json", "yaml"] {
            let what = format!("-o {output} --color {color}");
            let w = world();
            let (code, out, err) = w.run(&[
                "web",
                "--image",
                NEW_IMAGE,
                "--endpoints",
                &w.endpoints,
                "--yes",
                "-v",
                "-o",
                output,
                "--color",
                color,
            ]);
            assert_eq!(code, 0, "{what}: {}", text::escape_lines(&err));
            // Documents are never coloured; the diff and stderr follow --color.
            assert_clean(
                &out,
                colored && output == "diff",
                &format!("{what}: stdout"),
            );
            assert_clean(&err, colored, &format!("{what}: stderr"));
            // The server's warning, once, escaped.
            assert_shows(&err, &format!("Warning: spec: {HEADER_SHOWN}\n"), &what);
            assert_eq!(plain(&err).matches("Warning: ").count(), 1, "{what}");
            // -v request lines.
            assert_shows(
                &err,
                "  PATCH /apis/apps/v1/namespaces/shop/deployments/web",
                &what,
            );
            let report = format!(
                "deployment.apps/web updated (image {} → {NEW_IMAGE})",
                shown("nginx:1.25")
            );
            let ingress_report =
                format!("ingress.networking.k8s.io/{PUBLIC} updated (public, 2 paths)");
            match output {
                "diff" => {
                    assert_shows(&out, &format!("(context {})", shown("ctx")), &what);
                    assert_shows(
                        &out,
                        &format!("-         image: {}\n", shown("nginx:1.25")),
                        &what,
                    );
                    assert_shows(&out, &format!("- path: {}\n", shown("/web/added")), &what);
                    assert_shows(&out, &format!("# {SHOWN}\n"), &what);
                    assert_shows(&out, &report, &what);
                    assert_shows(&out, &ingress_report, &what);
                }
                _ => {
                    // The document carries the exact bytes; the report goes to stderr.
                    let doc: Value = if output == "json" {
                        serde_json::from_str(&out).unwrap()
                    } else {
                        serde_saphyr::from_str(&out).unwrap()
                    };
                    assert_eq!(doc["context"], json!(w.context), "{what}");
                    let objects = doc["objects"].as_array().unwrap();
                    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
                    assert_eq!(deployment["fields"][0]["before"], json!(w.image), "{what}");
                    let public = objects.iter().find(|o| o["name"] == PUBLIC).unwrap();
                    let before = public["before"].to_string();
                    assert!(
                        before.contains(&serde_json::to_string(&w.path).unwrap()),
                        "{what}"
                    );
                    assert!(
                        before.contains(&serde_json::to_string(&w.snippet).unwrap()),
                        "{what}"
                    );
                    assert_shows(&err, &report, &what);
                    assert_shows(&err, &ingress_report, &what);
                }
            }
            assert_eq!(w.env.image(), NEW_IMAGE, "{what}");
        }
    }
}

#[test]
fn a_dry_run_plan_shows_the_hostile_values_escaped() {
    for (color, colored) in COLORS {
        let w = world();
        let (code, out, err) = w.run(&[
            "web",
            "--image",
            NEW_IMAGE,
            "--endpoints",
            &w.endpoints,
            "--dry-run",
            "--detailed-exitcode",
            "--color",
            color,
        ]);
        assert_eq!(code, 2, "{err}");
        assert_clean(&out, colored, "stdout");
        assert_clean(&err, colored, "stderr");
        assert_shows(&out, &format!("+         image: {NEW_IMAGE}"), color);
        assert_shows(&out, &shown("nginx:1.25"), color);
        assert_eq!(w.env.image(), w.image);
    }
}

// ---- refusals: the Status of a server or an admission webhook ----

fn webhook_denial(code: u16, reason: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("admission webhook \"deny.example.com\" denied the request: {PAYLOAD}"),
        "reason": reason, "code": code,
    })
}

#[test]
fn a_refusing_server_or_webhook_is_quoted_escaped_before_and_after_the_writes() {
    let denial_shown =
        format!("admission webhook \"deny.example.com\" denied the request: {SHOWN}");
    for (color, colored) in COLORS {
        for (step, method, dry_run, code, reason) in [
            ("read", "GET", None, 500, hostile("InternalError")),
            ("dry run", "PATCH", Some(true), 403, "Forbidden".to_owned()),
            ("dry run", "PATCH", Some(true), 422, "Invalid".to_owned()),
            ("dry run", "PATCH", Some(true), 400, hostile("BadRequest")),
            (
                "write",
                "PATCH",
                Some(false),
                500,
                "InternalError".to_owned(),
            ),
            ("write", "PATCH", Some(false), 403, "Forbidden".to_owned()),
        ] {
            let what = format!("{step} {code} --color {color}");
            let w = world();
            w.front.refuse(Refusal {
                method,
                path: DEPLOY_PATH.into(),
                dry_run,
                code,
                status: webhook_denial(code, &reason),
                count: 100,
            });
            // A dry run is sent when the run writes more than one object: the HPA too.
            let mut args = vec!["web", "--image", NEW_IMAGE, "--yes", "-v", "--color", color];
            if step == "dry run" {
                args.extend(["--max", "9"]);
            }
            let (exit, out, err) = w.run(&args);
            assert_eq!(exit, 1, "{what}: {}", text::escape_lines(&err));
            assert_clean(&out, colored, &format!("{what}: stdout"));
            assert_clean(&err, colored, &format!("{what}: stderr"));
            assert_shows(&err, &denial_shown, &what);
            // -v names the answer, with its reason escaped.
            assert_shows(&err, &format!(": {code} {}", text::escape(&reason)), &what);
            if step == "read" {
                assert_shows(&err, "error: ", &what);
            } else {
                assert_shows(&err, "deployment.apps/web NOT updated: ", &what);
                assert_shows(&err, "Nothing was changed.", &what);
            }
            assert_eq!(w.env.image(), w.image, "{what}");
        }
    }
}

// ---- the guard ----

#[test]
fn a_tripped_guard_shows_the_new_hostile_value_escaped() {
    for (color, colored) in COLORS {
        let w = world();
        let other = hostile("evil:9");
        let moved = other.clone();
        w.env.sb.inject(Fault::CompetingWrite {
            object_path: DEPLOY_PATH.into(),
            after: Trigger::NextRealWrite,
            mutate: Box::new(move |d| {
                d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(moved);
            }),
        });
        let (code, out, err) = w.run(&["web", "--image", NEW_IMAGE, "--yes", "--color", color]);
        assert_eq!(code, 5, "{}", text::escape_lines(&err));
        assert_clean(&out, colored, "stdout");
        assert_clean(&err, colored, "stderr");
        assert_shows(
            &err,
            "The live object changed after the plan was shown.",
            color,
        );
        assert_shows(
            &err,
            &format!("-         image: {}\n", shown("evil:9")),
            color,
        );
        assert_shows(
            &err,
            &format!(
                "image is now \"{}\" (the plan showed \"{}\")",
                shown("evil:9"),
                shown("nginx:1.25")
            ),
            color,
        );
        assert_eq!(w.env.image(), other);
    }
}

// ---- --wait ----

#[test]
fn a_refused_watch_during_wait_is_quoted_escaped_when_the_time_runs_out() {
    let denial_shown =
        format!("admission webhook \"deny.example.com\" denied the request: {SHOWN}");
    for (color, colored) in COLORS {
        let w = world();
        // Every list of the Deployment (the watch's first request) is refused: the wait
        // retries until --timeout and then says what it last met.
        w.front.refuse(Refusal {
            method: "GET",
            path: "/apis/apps/v1/namespaces/shop/deployments".into(),
            dry_run: None,
            code: 500,
            status: webhook_denial(500, "InternalError"),
            count: 1000,
        });
        let (code, out, err) = w.run(&[
            "web",
            "--image",
            NEW_IMAGE,
            "--yes",
            "--wait",
            "--timeout",
            "2s",
            "--color",
            color,
        ]);
        assert_eq!(code, 7, "{}", text::escape_lines(&err));
        assert_clean(&out, colored, "stdout");
        assert_clean(&err, colored, "stderr");
        assert_shows(
            &err,
            "error: timed out after 2s waiting for the rollout",
            color,
        );
        assert_shows(&err, "no status seen yet (cannot list ", color);
        assert_shows(&err, &denial_shown, color);
    }
}

#[test]
fn a_hostile_condition_message_during_wait_comes_out_escaped() {
    for (color, colored) in COLORS {
        let w = world();
        let mut run = Running::start(
            &w.env,
            &[
                "web",
                "--image",
                NEW_IMAGE,
                "--yes",
                "--wait",
                "--timeout",
                "60s",
                "--color",
                color,
            ],
        );
        run.wait_for_stderr("Waiting for the rollout of deployment.apps/web");
        // Whoever may write the status (a controller, or anyone with that right) writes the
        // condition, through the status subresource as kubectl does.
        let generation = w.env.deployment()["metadata"]["generation"].clone();
        let status = json!({"status": {
            "observedGeneration": generation, "replicas": 3, "updatedReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded", "message": hostile("ReplicaSet \"web-1\" has timed out")}],
        }});
        let direct = w.env.dir.path().join("direct-kubeconfig");
        w.env.sb.write_kubeconfig(&direct, NS).unwrap();
        let patched = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&direct)
            .args([
                "-n",
                NS,
                "patch",
                "deployment",
                APP,
                "--subresource=status",
                "--type=merge",
                "-p",
            ])
            .arg(status.to_string())
            .output()
            .unwrap();
        assert!(patched.status.success(), "{}", stderr(&patched));
        let (code, out, err) = run.finish();
        assert_eq!(code, 7, "{}", text::escape_lines(&err));
        assert_clean(&out, colored, "stdout");
        assert_clean(&err, colored, "stderr");
        assert_shows(
            &err,
            &format!(
                "the rollout of deployment.apps/web in namespace \"shop\" (context \"{}\") failed: exceeded its progress deadline ({})",
                shown("ctx"),
                shown("ReplicaSet \"web-1\" has timed out")
            ),
            color,
        );
    }
}

// ---- files, the environment and the command line ----

#[test]
fn hostile_files_names_and_flag_values_are_quoted_escaped_in_errors() {
    for (color, colored) in COLORS {
        let w = world();
        let dir = w.env.dir.path();
        // An endpoints file whose path holds the payload (written with YAML escapes).
        let quoted: String = hostile("/a")
            .chars()
            .map(|c| format!("\\U{:08X}", u32::from(c)))
            .collect();
        let bad_path = dir.join("bad-path.yaml");
        std::fs::write(&bad_path, format!("endpoints:\n  - path: \"{quoted}\"\n")).unwrap();
        // An endpoints file whose name holds the payload (and is not valid YAML).
        let bad_name = dir.join(hostile("e"));
        std::fs::write(&bad_name, "endpoints: [\n").unwrap();
        let missing = dir.join(hostile("missing"));
        let cases: Vec<(Vec<String>, i32, String)> = vec![
            (
                vec![
                    "web".into(),
                    "--endpoints".into(),
                    bad_path.to_str().unwrap().into(),
                ],
                3,
                format!("bad-path.yaml:2: path \"{}\"", shown("/a")),
            ),
            (
                vec![
                    "web".into(),
                    "--endpoints".into(),
                    bad_name.to_str().unwrap().into(),
                ],
                3,
                shown("e"),
            ),
            (
                vec![
                    "web".into(),
                    "--endpoints".into(),
                    missing.to_str().unwrap().into(),
                ],
                3,
                shown("missing"),
            ),
            (
                vec!["web".into(), "--image".into(), hostile("nginx:")],
                3,
                format!("--image \"{}\"", shown("nginx:")),
            ),
            (
                vec![
                    "web".into(),
                    "--max".into(),
                    "9".into(),
                    "-n".into(),
                    hostile("x"),
                ],
                3,
                format!("-n/--namespace \"{}\"", shown("x")),
            ),
            (
                vec![
                    "web".into(),
                    "--max".into(),
                    "9".into(),
                    "--context".into(),
                    hostile("nope"),
                ],
                3,
                format!("context \"{}\" does not exist", shown("nope")),
            ),
            (
                vec![
                    "web".into(),
                    "--max".into(),
                    "9".into(),
                    "--request-timeout".into(),
                    hostile("9"),
                ],
                3,
                shown("9"),
            ),
            // clap's own message: clap takes escape sequences out of the argument it quotes
            // (its plain rendering strips them); what is left is escaped.
            (
                vec!["web".into(), hostile("--unknown")],
                3,
                "'--unknown\\u{9b}31m\\u{202e}\\u{2066}\\u{200b}'".into(),
            ),
        ];
        for (args, code, needle) in cases {
            let what = format!("{} --color {color}", text::escape(&args.join(" ")));
            let mut full: Vec<&str> = args.iter().map(String::as_str).collect();
            full.extend(["--color", color]);
            let (exit, out, err) = w.run(&full);
            assert_eq!(exit, code, "{what}: {}", text::escape_lines(&err));
            assert_clean(&out, colored, &format!("{what}: stdout"));
            assert_clean(&err, colored, &format!("{what}: stderr"));
            assert_shows(&err, &needle, &what);
        }
        // The lists of contexts, clusters and users name each one, escaped.
        for (flag, list, name) in [
            ("--context", "contexts", "ctx"),
            ("--cluster", "clusters", "cluster"),
            ("--user", "users", "user"),
        ] {
            let (exit, out, err) = w.run(&["web", "--max", "9", flag, "nope", "--color", color]);
            assert_eq!(exit, 3, "{flag}: {}", text::escape_lines(&err));
            assert_clean(&out, colored, flag);
            assert_clean(&err, colored, flag);
            assert_shows(&err, &format!("({list}: {})", shown(name)), flag);
        }
    }
}

#[test]
fn a_hostile_namespace_in_the_kubeconfig_is_escaped() {
    let w = world();
    let text = std::fs::read_to_string(&w.env.kubeconfig).unwrap();
    let namespace = ascii_json(&json!(hostile("shop")));
    let path = w.env.dir.path().join("hostile-namespace");
    std::fs::write(&path, text.replace("\"shop\"", &namespace)).unwrap();
    for (color, colored) in COLORS {
        for output in ["diff", "json"] {
            let mut c = plugin();
            c.arg("--kubeconfig")
                .arg(&path)
                .args(["web", "--max", "9", "-v", "-o", output, "--color", color]);
            let o = c.output().unwrap();
            let (out, err) = (stdout(&o), stderr(&o));
            assert_eq!(code(&o), 3, "{}", text::escape_lines(&err));
            assert_clean(&out, colored, "stdout");
            assert_clean(&err, colored, "stderr");
            assert_shows(
                &err,
                &format!(
                    "the namespace \"{}\" is not a valid namespace name",
                    shown("shop")
                ),
                color,
            );
        }
    }
}

#[test]
fn hostile_kubeconfig_paths_from_the_environment_are_escaped() {
    let w = world();
    let first = w.env.dir.path().join(hostile("a"));
    let second = w.env.dir.path().join(hostile("b"));
    let list = format!("{}:{}", first.display(), second.display());
    for (color, colored) in COLORS {
        let mut c = plugin();
        c.args(["web", "--max", "9", "--color", color])
            .env("KUBECONFIG", &list);
        let o = c.output().unwrap();
        assert_eq!(code(&o), 3);
        let err = stderr(&o);
        assert_clean(&err, colored, "stderr");
        assert_shows(&err, "none of the files in KUBECONFIG exists", color);
        assert_shows(&err, &shown("a"), color);
    }
}

// ---- the prompt, in a terminal ----

#[test]
fn the_prompt_names_the_hostile_context_escaped() {
    let w = world();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("kubectl-appupdate"));
    scrub(&mut cmd);
    cmd.env("TERM", "xterm-256color");
    cmd.arg("--kubeconfig")
        .arg(&w.env.kubeconfig)
        .args(["web", "--max", "9"]);
    let mut p = rexpect::session::spawn_command(cmd, Some(30_000)).unwrap();
    let question = format!(
        "Apply these changes to web in namespace shop (context {}):",
        shown("ctx")
    );
    let before = p.exp_string(&question).unwrap();
    pty::wait_for_prompt(&mut p, "(y/n)");
    pty::answer(&mut p, &["n", "\r"]);
    let after = p.exp_eof().unwrap();
    let transcript = before + &question + &after;
    // A terminal: dialoguer and console draw with cursor and line controls of their own, but
    // nothing from the cluster does — no OSC, no screen clear, no C1, no bidi or zero-width.
    for bad in [
        "\u{1b}]",
        "\u{1b}[2J",
        "\u{7}",
        "\u{9b}",
        "\u{202e}",
        "\u{2066}",
        "\u{200b}",
    ] {
        assert!(
            !transcript.contains(bad),
            "{:?} in {:?}",
            bad,
            text::escape(&transcript)
        );
    }
    assert!(plain(&transcript).contains("not confirmed"));
}

/// A history record as anyone who may write ConfigMaps could store it, with `user` holding
/// invisible and bidi characters (no control characters: the record would be unverifiable).
#[test]
fn history_as_data_carries_a_hostile_user_exactly_and_escaped() {
    use base64::Engine as _;
    use std::io::Write as _;
    let env = Env::new();
    let user = "ad\u{202e}\u{2066}\u{200b}min";
    let record = json!({
        "revision": 1, "time": "2026-12-01T07:00:00Z", "user": user,
        "tool": "kubectl-appupdate 0.1.0", "status": "applied", "source": {"type": "update"},
        "bounds": {"max": {"before": 5, "after": 6}},
    });
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(record.to_string().as_bytes()).unwrap();
    let text = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
    env.sb
        .create(
            "/api/v1/namespaces/shop/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "web-appupdate-history", "labels": {"app": "web"}},
                   "binaryData": {"revision-1.json.gz": text}}),
        )
        .unwrap();
    for format in ["json", "yaml"] {
        let o = env.run(&["history", "web", "-o", format]);
        assert_code(&o, 0);
        let out = stdout(&o);
        assert_clean(&out, false, format);
        let doc: Value = if format == "json" {
            serde_json::from_str(&out).expect("one JSON document")
        } else {
            serde_saphyr::from_str(&out).expect("one YAML document")
        };
        assert_eq!(doc["records"][0]["user"], json!(user), "{format}: {out}");
    }
    let o = env.run(&["history", "web"]);
    assert_code(&o, 0);
    assert_clean(&stdout(&o), false, "table");
    assert!(
        stdout(&o).contains(r"ad\u{202e}\u{2066}\u{200b}min"),
        "{}",
        stdout(&o)
    );
}
