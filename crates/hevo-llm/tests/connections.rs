//! A sandboxed trial's gateway socket holds at most `TRIAL_CONNECTIONS` connections: a
//! harness that opened thousands of idle ones used up hevo's descriptors and stopped every
//! trial's calls (and the disk watch). Past the cap its connections wait in the kernel's
//! queue; another trial's socket answers as before. A test binary of its own: it counts
//! this process's descriptors, which other tests running beside it would change.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use hevo_llm::{Caps, Gateway, GatewayConfig, MemorySink, PriceTable, TRIAL_CONNECTIONS};

/// The descriptors this process holds.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trial_hoarding_connections_holds_at_most_its_cap_and_others_are_served() {
    let config = GatewayConfig::new(Vec::new(), PriceTable::empty());
    let handle = Gateway::start(config, Vec::new(), Arc::new(MemorySink::new())).unwrap();
    let gateway = handle.gateway();
    let dir = tempfile::tempdir().unwrap();
    let socket = |name: &str| {
        let key = gateway
            .open_trial(name, &dir.path().join(name), Caps::UNLIMITED)
            .unwrap();
        let path = dir.path().join(format!("{name}.sock"));
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let bound = gateway.serve_bound(key.as_str(), listener).unwrap();
        (path, bound)
    };
    let (hoard_path, _hoard) = socket("hoarder");
    let (honest_path, _honest) = socket("honest");
    let before = open_fds();
    let n = 300;
    let hoard: Vec<UnixStream> = (0..n)
        .map(|_| UnixStream::connect(&hoard_path).unwrap())
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // this process holds the n client ends; the gateway's accepted ends are the rest
    let accepted = open_fds().saturating_sub(before + n);
    assert!(
        accepted <= TRIAL_CONNECTIONS + 8,
        "the gateway holds {accepted} connections of one trial"
    );
    let reply = tokio::task::spawn_blocking(move || {
        let mut conn = UnixStream::connect(&honest_path).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            conn,
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        let _ = conn.read_to_string(&mut reply);
        reply
    })
    .await
    .unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    drop(hoard);
}
