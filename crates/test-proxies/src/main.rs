//! `test-proxies http|https|socks5 [--listen ADDR] [--user USER:PASSWORD]`: runs one of the test
//! proxies in the foreground and prints one line per request on stderr (never credentials),
//! for trying kubectl and kubectl-appupdate side by side behind a proxy.

use std::net::SocketAddr;

use test_proxies::{Kind, Options, TestProxy};

fn usage() -> ! {
    eprintln!("usage: test-proxies http|https|socks5 [--listen ADDR] [--user USER:PASSWORD]");
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = match args.next().as_deref() {
        Some("http") => Kind::Http,
        Some("https") => Kind::Https,
        Some("socks5") => Kind::Socks5,
        _ => usage(),
    };
    let mut listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut opts = Options {
        log_to_stderr: true,
        ..Options::default()
    };
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--listen", Some(a)) => listen = a.parse().unwrap_or_else(|_| usage()),
            ("--user", Some(u)) => match u.split_once(':') {
                Some((user, password)) => {
                    opts.credentials = Some((user.to_owned(), password.to_owned()))
                }
                None => usage(),
            },
            _ => usage(),
        }
    }
    let proxy = match TestProxy::start_on(kind, opts, listen) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cannot listen on {listen}: {e}");
            std::process::exit(1)
        }
    };
    eprintln!("listening on {}", proxy.url());
    // Serve until interrupted.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let _keep = tx;
    let _ = rx.recv();
}
