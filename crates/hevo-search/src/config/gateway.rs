//! `[gateway]`: where the model gateway listens and the URL that trials on other machines
//! are given, checked while parsing (`docs/config.md`, `docs/scale-out.md`).

use serde::Deserialize;

/// `[gateway]`: where the model gateway listens (`docs/config.md`, `docs/scale-out.md`).
/// Checked while parsing, so a bad value is reported with its line.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(try_from = "ListenTable")]
pub struct ListenConfig {
    /// `bind` and `advertise`; `None`: loopback at a free port (the default).
    pub listen: Option<hevo_llm::Listen>,
}

impl ListenConfig {
    /// The listener the gateway is served on.
    pub fn listen(&self) -> hevo_llm::Listen {
        self.listen.clone().unwrap_or_default()
    }
}

/// `[gateway]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListenTable {
    bind: Option<String>,
    advertise: Option<String>,
}

impl TryFrom<ListenTable> for ListenConfig {
    type Error = String;

    fn try_from(t: ListenTable) -> Result<ListenConfig, String> {
        let Some(bind) = t.bind else {
            return match t.advertise {
                Some(_) => Err(
                    "`gateway.advertise` is set without `gateway.bind`: the gateway \
                                listens on 127.0.0.1 only, which other machines cannot reach; add \
                                e.g. `bind = \"0.0.0.0:8400\"`"
                        .into(),
                ),
                None => Ok(ListenConfig::default()),
            };
        };
        let addr: std::net::SocketAddr = bind.parse().map_err(|_| {
            format!(
                "`gateway.bind` is `{bind}`: give an IP address and a port, e.g. \
                 \"0.0.0.0:8400\" or \"10.0.0.5:0\" (port 0: a free one)"
            )
        })?;
        if let Some(url) = &t.advertise {
            hevo_llm::check_advertise(url)
                .map_err(|p| format!("`gateway.advertise` is `{url}`: it {p}"))?;
        } else if addr.ip().is_unspecified() {
            return Err(format!(
                "`gateway.bind` is `{bind}` (every interface) but no `gateway.advertise` says \
                 which address the compute nodes use: add e.g. \
                 `advertise = \"http://<this host's name or IP>\"`"
            ));
        }
        Ok(ListenConfig {
            listen: Some(hevo_llm::Listen {
                bind: addr,
                advertise: t.advertise,
            }),
        })
    }
}
