//! [`Listen`]: where the gateway listens and the URL trial-side processes are given.
//!
//! By default the gateway binds `127.0.0.1` at a free port and harnesses get that loopback
//! URL. Trials on other machines (Slurm compute nodes) need it bound to an address they can
//! reach and told a URL that names it (`[gateway] bind` and `advertise` in `hevo.toml`).

use std::net::{Ipv4Addr, SocketAddr};

/// The listener address and the base URL handed to trial-side processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listen {
    /// The address bound (port 0: a free one).
    pub bind: SocketAddr,
    /// The base URL processes are given, without `/v1` (e.g. `http://login-node:8400`); a
    /// URL without a port gets the bound one. `None`: `http://<bind ip>:<port>`.
    pub advertise: Option<String>,
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            advertise: None,
        }
    }
}

impl Listen {
    /// Whether other machines can connect (the bound address is not a loopback one).
    pub fn is_exposed(&self) -> bool {
        !self.bind.ip().is_loopback()
    }

    /// The base URL (no trailing `/`, no `/v1`) for a listener bound at `addr`.
    pub fn base_url(&self, addr: SocketAddr) -> String {
        match &self.advertise {
            Some(url) => {
                let url = url.trim_end_matches('/');
                if has_port(url) {
                    url.to_string()
                } else {
                    format!("{url}:{}", addr.port())
                }
            }
            None => format!("http://{addr}"),
        }
    }

    /// The base URL for processes on this machine: loopback when the listener accepts it
    /// (bound to loopback or to every interface), else the bound address.
    pub fn local_base_url(&self, addr: SocketAddr) -> String {
        if addr.ip().is_unspecified() || addr.ip().is_loopback() {
            format!("http://127.0.0.1:{}", addr.port())
        } else {
            format!("http://{addr}")
        }
    }
}

/// Checks an advertised URL: `http://` or `https://`, a host, no query; returns the problem.
pub fn check_advertise(url: &str) -> Result<(), String> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Err("must start with `http://` or `https://`".into());
    };
    let authority = rest.split('/').next().unwrap_or("");
    let host = authority
        .rsplit_once(':')
        .filter(|(h, p)| !h.ends_with(':') && p.parse::<u16>().is_ok())
        .map_or(authority, |(h, _)| h);
    if host.is_empty() || host.contains(['?', '#', '@', ' ']) {
        return Err("names no host (e.g. `http://login-node:8400`)".into());
    }
    if url.contains(['?', '#']) {
        return Err("has a query or fragment: give the base URL only".into());
    }
    Ok(())
}

/// Whether `url`'s authority carries a port (`http://h:1`, `http://[::1]:1`).
fn has_port(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let after_bracket = authority.rsplit_once(']').map_or(authority, |(_, a)| a);
    after_bracket
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_urls_get_the_bound_port_when_they_name_none() {
        let addr: SocketAddr = "0.0.0.0:4321".parse().unwrap();
        let l = |a: Option<&str>| Listen {
            bind: addr,
            advertise: a.map(str::to_string),
        };
        assert_eq!(l(None).base_url(addr), "http://0.0.0.0:4321");
        assert_eq!(l(Some("http://login/")).base_url(addr), "http://login:4321");
        assert_eq!(l(Some("http://login:80")).base_url(addr), "http://login:80");
        assert_eq!(l(Some("http://[::1]")).base_url(addr), "http://[::1]:4321");
        assert_eq!(l(None).local_base_url(addr), "http://127.0.0.1:4321");
        assert!(l(None).is_exposed());
        assert!(!Listen::default().is_exposed());
        assert!(check_advertise("http://10.0.0.5:8400").is_ok());
        assert!(check_advertise("https://login-node").is_ok());
        assert!(check_advertise("login-node:8400").is_err());
        assert!(check_advertise("http://").is_err());
        assert!(check_advertise("http://h/?x").is_err());
    }
}
