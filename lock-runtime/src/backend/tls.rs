//! TLS for every connection a backend opens: the certificates of
//! `LockConfig` applied to each `rediss` address, including the masters
//! that sentinels name.

use redis::{ConnectionAddr, ConnectionInfo, RedisResult};

use crate::config::tls::TlsSettings;

/// `info`, carrying the configured certificates when it is a TLS address.
pub(crate) fn with_tls(info: ConnectionInfo, tls: &TlsSettings) -> RedisResult<ConnectionInfo> {
    if !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
        return Ok(info);
    }
    #[cfg(feature = "tls")]
    {
        install_crypto_provider();
        if tls.is_set() {
            let client = redis::Client::build_with_tls(info, tls.certificates())?;
            return Ok(client.get_connection_info().clone());
        }
    }
    let _ = tls;
    Ok(info)
}

/// A client for `info` with the configured certificates.
pub(crate) fn client(info: ConnectionInfo, tls: &TlsSettings) -> RedisResult<redis::Client> {
    redis::Client::open(with_tls(info, tls)?)
}

/// rustls needs a process-wide crypto provider, and picks none by itself
/// when an application's other dependencies enable a second one: install
/// ours (ring) unless the application installed its own first.
#[cfg(feature = "tls")]
fn install_crypto_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
