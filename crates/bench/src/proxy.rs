//! A TCP proxy that adds network latency: every chunk read in either direction is written to the
//! other side RTT/2 later, in order. TCP's own connect handshake is simulated too: nothing the
//! client sends reaches the server before one RTT has passed since the connection was accepted
//! (SYN, SYN-ACK), so a new connection costs what it costs on a real network: one RTT for TCP,
//! then whatever the TLS handshake needs.
//!
//! The RTT is read when a connection is accepted and holds for that connection; change it with
//! [`LatencyProxy::set_rtt`] between runs.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A running proxy; it stops when the runtime it was started on shuts down.
pub struct LatencyProxy {
    addr: SocketAddr,
    rtt_micros: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
}

impl LatencyProxy {
    /// Listens on 127.0.0.1 (any free port) and forwards every connection to `upstream`.
    /// Must be called inside a tokio runtime, which runs the proxy.
    pub async fn start(upstream: SocketAddr, rtt: Duration) -> io::Result<LatencyProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let rtt_micros = Arc::new(AtomicU64::new(micros(rtt)));
        let connections = Arc::new(AtomicU64::new(0));
        let (r, c) = (rtt_micros.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let accepted = Instant::now();
                c.fetch_add(1, Ordering::SeqCst);
                let rtt = Duration::from_micros(r.load(Ordering::SeqCst));
                tokio::spawn(async move {
                    // A failed upstream connect drops the client connection, as a refused
                    // connection would.
                    let _ = relay(client, upstream, rtt, accepted).await;
                });
            }
        });
        Ok(LatencyProxy {
            addr,
            rtt_micros,
            connections,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The RTT for connections accepted from now on.
    pub fn set_rtt(&self, rtt: Duration) {
        self.rtt_micros.store(micros(rtt), Ordering::SeqCst);
    }

    pub fn rtt(&self) -> Duration {
        Duration::from_micros(self.rtt_micros.load(Ordering::SeqCst))
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

async fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    rtt: Duration,
    accepted: Instant,
) -> io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_r, client_w) = client.into_split();
    let (server_r, server_w) = server.into_split();
    let half = rtt / 2;
    // Client → server: not before the TCP handshake (one RTT) has completed.
    let up = pipe(client_r, server_w, half, Some(accepted + rtt));
    let down = pipe(server_r, client_w, half, None);
    let _ = tokio::join!(up, down);
    Ok(())
}

/// Copies `from` to `to`, each chunk delayed by `delay` after it was read (and, when given,
/// not leaving before `not_before`). Chunks keep their order; end of stream is forwarded as a
/// write shutdown after the chunks before it.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
    not_before: Option<Instant>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Option<Vec<u8>>)>();
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => 0,
                Ok(n) => n,
            };
            let now = Instant::now();
            let sent = match not_before {
                Some(t) if t > now => t,
                _ => now,
            };
            let chunk = (n > 0).then(|| buf[..n].to_vec());
            if tx.send((sent + delay, chunk)).is_err() || n == 0 {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            // A timer rounds up to the next millisecond; at RTT 0 there is nothing to wait for.
            if due > Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            match chunk {
                Some(bytes) => {
                    if to.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                None => {
                    let _ = to.shutdown().await;
                    break;
                }
            }
        }
    };
    tokio::join!(reader, writer);
}
