//! Uploads that stall, sent by a raw HTTP client: a request holds only the body bytes it
//! has sent, not what its `Content-Length` declares, so requests that declare 32 MiB and
//! send it a byte at a time do not stop anyone's calls; and a body that sends nothing for
//! the idle timeout is answered 408 and gives its slot back.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hevo_llm::{CallStatus, Caps, GatewayConfig, TrialKey};

use crate::held_gateway::HeldGateway;

/// Connects to the gateway and sends the head of a chat completion with `key` declaring
/// `declared` body bytes, then the first `sent` of them.
fn stall(addr: SocketAddr, key: &TrialKey, declared: usize, sent: usize) -> TcpStream {
    let mut conn = TcpStream::connect(addr).unwrap();
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n{}",
        key.as_str(),
        "{".repeat(sent)
    )
    .unwrap();
    conn
}

/// The status line the gateway answers on `conn` (a guard of 120 s fails the test instead
/// of hanging it).
fn status_line(conn: &mut TcpStream) -> String {
    reply(conn).lines().next().unwrap_or_default().to_owned()
}

/// What the gateway answers on `conn`: its head and the body that came with it (read until
/// the answer pauses; a guard of 120 s for its first byte).
fn reply(conn: &mut TcpStream) -> String {
    conn.set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                conn.set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
            }
            Err(_) if !reply.is_empty() => break,
            Err(err) => panic!("no answer from the gateway: {err}"),
        }
    }
    String::from_utf8_lossy(&reply).into_owned()
}

/// Keeps uploads alive, as slowly as a caller may: one byte to each every 200 ms (far
/// within the idle timeout), until dropped.
struct Trickle {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Trickle {
    fn start(mut conns: Vec<TcpStream>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                for conn in &mut conns {
                    let _ = conn.write_all(b" ");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Trickle {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_that_declare_32_mib_and_trickle_do_not_stop_other_calls() {
    let t = HeldGateway::start(GatewayConfig::DRAIN_TIMEOUT).await;
    let keys = [
        t.trial("t0", Caps::UNLIMITED),
        t.trial("t1", Caps::UNLIMITED),
    ];
    // by what they declare, two per trial would take each trial's 64 MiB and the gateway's
    // 128 MiB of body bytes; they send a byte now and then, so they never time out
    let addr = t.gateway.addr();
    let stalled = [0, 0, 1, 1]
        .iter()
        .map(|&i| stall(addr, &keys[i], 32 << 20, 0))
        .collect();
    let trickle = Trickle::start(stalled);
    for key in &keys {
        let vars = [("HEVO_TEST_TIMEOUT", "120")];
        let Some(out) = t.harness("one_call.py", key, &vars) else {
            return;
        };
        assert_eq!(out["answer"], "w0 w1", "{out}");
    }
    for trial in ["t0", "t1"] {
        let rows = t.rows(trial);
        assert_eq!(rows.len(), 1, "{rows:#?}");
        assert_eq!(rows[0].status, CallStatus::Ok);
    }
    drop(trickle);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_that_stalls_is_answered_408_after_the_idle_timeout_and_frees_its_slot() {
    let t =
        HeldGateway::start_with(|config| config.body_idle_timeout = Duration::from_secs(1)).await;
    // the trial may make one call at a time: the stalled upload holds its only slot
    let caps = Caps {
        max_concurrent: Some(1),
        ..Caps::UNLIMITED
    };
    let key = t.trial("t0", caps);
    let mut stalled = stall(t.gateway.addr(), &key, 1000, 10);
    let answer = tokio::task::block_in_place(|| reply(&mut stalled));
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // in the caller's error format, as every other refusal (it was plain text)
    assert!(
        answer.contains("application/json") && answer.contains("\"code\":\"request_timeout\""),
        "{answer}"
    );
    let vars = [("HEVO_TEST_TIMEOUT", "120")];
    let Some(out) = t.harness("one_call.py", &key, &vars) else {
        return;
    };
    assert_eq!(out["answer"], "w0 w1", "{out}");
    // the stalled upload never became a call
    let rows = t.rows("t0");
    assert_eq!(rows.len(), 1, "{rows:#?}");
}

/// Requests with no trial's key are answered 401 without their bodies being read, so
/// dripping them holds none of the gateway's call slots: a sandboxed harness sent 300 such
/// requests, a byte every 10 s each, and starved every other trial's calls.
#[tokio::test(flavor = "multi_thread")]
async fn keyless_uploads_that_trickle_hold_no_slot_of_the_gateway() {
    let t = HeldGateway::start_with(|config| {
        config.run_caps = Caps {
            max_concurrent: Some(4),
            ..Caps::UNLIMITED
        }
    })
    .await;
    let key = t.trial("t0", Caps::UNLIMITED);
    let addr = t.gateway.addr();
    let mut keyless: Vec<TcpStream> = (0..8)
        .map(|i| {
            let mut conn = TcpStream::connect(addr).unwrap();
            // half with no key, half with a key no trial has
            let auth = if i % 2 == 0 {
                String::new()
            } else {
                "Authorization: Bearer hevo-000000000000000000000000000000000000000000000000\r\n"
                    .to_owned()
            };
            write!(
                conn,
                "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n{auth}\
                 Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{"
            )
            .unwrap();
            conn
        })
        .collect();
    let status = tokio::task::block_in_place(|| status_line(&mut keyless[0]));
    assert!(status.starts_with("HTTP/1.1 401"), "{status}");
    let trickle = Trickle::start(keyless);
    let vars = [("HEVO_TEST_TIMEOUT", "20")];
    let Some(out) = t.harness("one_call.py", &key, &vars) else {
        return;
    };
    assert_eq!(out["answer"], "w0 w1", "{out}");
    drop(trickle);
}
