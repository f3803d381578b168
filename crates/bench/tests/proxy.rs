//! The latency proxy forwards bytes both ways, in order, and forwards end of stream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use appupdate_bench::proxy::LatencyProxy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::test]
async fn forwards_bytes_in_order_both_ways_and_closes() {
    // An echo server that upper-cases what it reads until end of stream.
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream_addr = upstream.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = upstream.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        loop {
            let n = s.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            s.write_all(&buf[..n].to_ascii_uppercase()).await.unwrap();
        }
        s.shutdown().await.unwrap();
    });

    let proxy = LatencyProxy::start(upstream_addr, Duration::from_millis(2))
        .await
        .unwrap();
    let mut c = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    let mut expected = Vec::new();
    for i in 0..50 {
        let chunk = format!("chunk-{i};");
        c.write_all(chunk.as_bytes()).await.unwrap();
        expected.extend_from_slice(chunk.to_ascii_uppercase().as_bytes());
    }
    c.shutdown().await.unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).await.unwrap();
    assert_eq!(
        String::from_utf8(got).unwrap(),
        String::from_utf8(expected).unwrap()
    );
    assert_eq!(proxy.connections(), 1);
}
