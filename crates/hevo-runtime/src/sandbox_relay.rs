//! The host side of a sandbox's only network path: one Unix socket per gateway port, bound
//! into the sandbox.
//!
//! The sockets live in a fresh directory per launch (`hevo-sock-*` under the temp
//! directory), so a trial can only ever reach the gateway through its own socket. When the
//! port is the one `OPENAI_BASE_URL`/`ANTHROPIC_BASE_URL` name and their key was issued by a
//! gateway of this process, that gateway serves the socket itself with the key bound to it
//! ([`hevo_llm::Gateway::serve_bound`]): the key then works only through this socket, so a
//! key stolen by another trial, or used over the TCP port, is refused. Any other port's
//! connections are forwarded to `127.0.0.1:<port>` on the host. The directory, the relay
//! tasks and the bound servers go away with the [`Relays`] value.

use std::path::Path;

use tokio::net::{TcpStream, UnixListener};
use tokio::task::JoinHandle;

use crate::sandbox::loopback_port;

/// The variables naming the gateway and the key it issued.
const GATEWAY_VARS: [(&str, &str); 2] = [
    ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
    ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
];

/// Running relays of one launch; dropping it stops them and removes the sockets.
pub(crate) struct Relays {
    dir: tempfile::TempDir,
    tasks: Vec<JoinHandle<()>>,
    bound: Vec<hevo_llm::BoundSocket>,
}

impl Relays {
    /// Binds `<dir>/<port>.sock` for each port: served by the issuing gateway with the key
    /// bound to it (see the module documentation), else forwarded to the host's
    /// `127.0.0.1:<port>`. `env` is the launch's environment. Must be called inside the tokio
    /// runtime.
    pub(crate) fn start(ports: &[u16], env: &[(String, String)]) -> std::io::Result<Relays> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("hevo-sock-{}-", std::process::id()))
            .tempdir()?;
        let mut tasks = Vec::new();
        let mut bound = Vec::new();
        for &port in ports {
            let listener = UnixListener::bind(dir.path().join(format!("{port}.sock")))?;
            let gateway = gateway_key(env, port)
                .and_then(|key| hevo_llm::Gateway::issuer_of(key).map(|g| (g, key)));
            if let Some((gateway, key)) = gateway {
                let socket = gateway
                    .serve_bound(key, listener)
                    .map_err(std::io::Error::other)?;
                bound.push(socket);
                continue;
            }
            tasks.push(tokio::spawn(async move {
                while let Ok((mut inside, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        if let Ok(mut host) = TcpStream::connect(("127.0.0.1", port)).await {
                            let _ = tokio::io::copy_bidirectional(&mut inside, &mut host).await;
                        }
                    });
                }
            }));
        }
        Ok(Relays { dir, tasks, bound })
    }

    /// The directory holding the sockets (bound read-only into the sandbox).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The key the launch's gateway variables give for `port`, if they name it.
fn gateway_key(env: &[(String, String)], port: u16) -> Option<&str> {
    let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    GATEWAY_VARS.iter().find_map(|(url, key)| {
        let url = get(url)?;
        (loopback_port(url) == Some(port)).then_some(())?;
        get(key)
    })
}

impl Drop for Relays {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.bound.clear();
    }
}
