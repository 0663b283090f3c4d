//! The sandbox's init: the first process hevo starts inside bubblewrap.
//!
//! `<hevo binary> __hevo-sandbox-init [--relay PORT=SOCKET]... [--memory-mb N]
//! [--max-files N] -- COMMAND...` listens on `127.0.0.1:PORT` inside the sandbox for each
//! relay and forwards every connection to the Unix socket `SOCKET` (which hevo serves on the
//! host side), applies the resource limits, runs `COMMAND` with the inherited stdio and
//! environment, and exits with its status. When it exits, the sandbox's PID 1 (bwrap) exits
//! and the kernel kills whatever the command left behind.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use crate::sandbox::INIT_ARG;

/// Runs as the sandbox's init if this process was started as one (its first argument is
/// [`INIT_ARG`]); never returns then. Call it first thing in `main`.
pub fn run_if_asked() {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == INIT_ARG) {
        let args: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        std::process::exit(init(&args));
    }
}

fn init(args: &[String]) -> i32 {
    let mut relays = Vec::new();
    let mut i = 0;
    while i < args.len() && args[i] != "--" {
        let value = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--relay" => relays.push(value),
            "--memory-mb" => limit(
                nix::sys::resource::Resource::RLIMIT_AS,
                value.parse::<u64>().ok().map(crate::cgroup::mb_bytes),
            ),
            "--max-files" => limit(
                nix::sys::resource::Resource::RLIMIT_NOFILE,
                value.parse().ok(),
            ),
            other => {
                eprintln!("hevo sandbox init: unknown option `{other}`");
                return 125;
            }
        }
        i += 2;
    }
    let command = &args[(i + 1).min(args.len())..];
    let Some(program) = command.first() else {
        eprintln!("hevo sandbox init: no command");
        return 125;
    };
    for relay in &relays {
        let Some((port, socket)) = relay.split_once('=') else {
            continue;
        };
        match TcpListener::bind(("127.0.0.1", port.parse::<u16>().unwrap_or(0))) {
            Ok(listener) => {
                let socket = socket.to_string();
                std::thread::spawn(move || serve(listener, socket));
            }
            Err(e) => eprintln!("hevo sandbox init: cannot listen on port {port}: {e}"),
        }
    }
    // SIGTERM is for the command (hevo sends it to every process of the sandbox but
    // bubblewrap's, `stop.rs`): init stays to report the command's exit. A handler, unlike
    // an ignored signal, is reset by `exec`, so the command gets the default.
    extern "C" fn stay(_: nix::libc::c_int) {}
    let handler = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(stay),
        nix::sys::signal::SaFlags::SA_RESTART,
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler does nothing, so it is async-signal-safe.
    if let Err(e) = unsafe { nix::sys::signal::sigaction(nix::sys::signal::SIGTERM, &handler) } {
        eprintln!("hevo sandbox init: cannot keep SIGTERM for its command: {e}");
    }
    match Command::new(program).args(&command[1..]).status() {
        Ok(status) => status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        Err(e) => {
            eprintln!("hevo sandbox init: cannot start `{program}`: {e}");
            127
        }
    }
}

fn limit(resource: nix::sys::resource::Resource, value: Option<u64>) {
    if let Some(v) = value {
        if let Err(e) = nix::sys::resource::setrlimit(resource, v, v) {
            eprintln!("hevo sandbox init: cannot set {resource:?} to {v}: {e}");
        }
    }
}

fn serve(listener: TcpListener, socket: String) {
    for conn in listener.incoming().flatten() {
        let socket = socket.clone();
        std::thread::spawn(move || {
            if let Ok(host) = UnixStream::connect(&socket) {
                pipe(conn, host);
            }
        });
    }
}

/// Copies both directions until either side closes.
fn pipe(tcp: TcpStream, unix: UnixStream) {
    let (Ok(mut tcp_r), Ok(mut unix_w)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut tcp_r, &mut unix_w);
        let _ = unix_w.shutdown(std::net::Shutdown::Write);
    });
    let (mut unix_r, mut tcp_w) = (unix, tcp);
    let mut buf = [0u8; 16 * 1024];
    loop {
        match unix_r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if std::io::Write::write_all(&mut tcp_w, &buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = tcp_w.shutdown(std::net::Shutdown::Write);
    let _ = up.join();
}
