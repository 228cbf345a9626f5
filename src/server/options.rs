//! How `serve` was asked to listen, checked: the options the command line
//! gives, read by the server and by the web view (which names its address
//! in the links it prints).

use std::net::{IpAddr, SocketAddr};

/// How `serve` was asked to listen.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    /// Also listen on this TCP port.
    pub tcp: Option<u16>,
    /// The address to bind the port to (loopback when absent).
    pub host: Option<String>,
    /// Host names clients may use besides the loopback ones.
    pub allowed_hosts: Vec<String>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback bind without a list of the names clients use.
    #[error(
        "--host {0} lets other machines connect; name the host names they use with --allowed-hosts NAME[,NAME…] \
         (requests with any other Host are refused)"
    )]
    NeedsAllowedHosts(String),
    /// The bind address is not an address.
    #[error("--host {0:?} is not an IP address (or localhost)")]
    BadHost(String),
}

/// Resolves the TCP bind address.
pub fn tcp_address(opts: &ServeOptions, port: u16) -> Result<SocketAddr, ServeError> {
    let host = opts.host.as_deref().unwrap_or("127.0.0.1");
    let ip: IpAddr = match host {
        "localhost" => IpAddr::from([127, 0, 0, 1]),
        h => h.trim_matches(['[', ']']).parse().map_err(|_| ServeError::BadHost(h.to_string()))?,
    };
    if !ip.is_loopback() && opts.allowed_hosts.is_empty() {
        return Err(ServeError::NeedsAllowedHosts(host.to_string()));
    }
    Ok(SocketAddr::new(ip, port))
}
