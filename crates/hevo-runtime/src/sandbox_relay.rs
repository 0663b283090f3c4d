//! The host side of a sandbox's only network path: one Unix socket per gateway port, bound
//! into the sandbox, each connection forwarded to `127.0.0.1:<port>` on the host.
//!
//! The sockets live in a fresh directory per launch (`hevo-sock-*` under the temp
//! directory), so a trial can only ever reach the gateway through its own socket; the
//! directory and the relay tasks go away with the [`Relays`] value.

use std::path::Path;

use tokio::net::{TcpStream, UnixListener};
use tokio::task::JoinHandle;

/// Running relays of one launch; dropping it stops them and removes the sockets.
pub(crate) struct Relays {
    dir: tempfile::TempDir,
    tasks: Vec<JoinHandle<()>>,
}

impl Relays {
    /// Binds `<dir>/<port>.sock` for each port and forwards its connections to the host's
    /// `127.0.0.1:<port>`. Must be called inside the tokio runtime.
    pub(crate) fn start(ports: &[u16]) -> std::io::Result<Relays> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("hevo-sock-{}-", std::process::id()))
            .tempdir()?;
        let mut tasks = Vec::new();
        for &port in ports {
            let listener = UnixListener::bind(dir.path().join(format!("{port}.sock")))?;
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
        Ok(Relays { dir, tasks })
    }

    /// The directory holding the sockets (bound read-only into the sandbox).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Relays {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
