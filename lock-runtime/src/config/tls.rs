//! TLS settings a URL cannot carry: a private CA and a client certificate
//! (mutual TLS). The URL says *whether* TLS is used (`rediss://`, or
//! `rediss+cluster://` and so on) and `#insecure` turns verification off.

use std::fmt;

use crate::error::LockError;

/// Certificates for TLS connections, in PEM.
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// CA certificates to trust instead of the built-in roots.
    pub(crate) root_ca: Option<Vec<u8>>,
    /// Client certificate chain and private key, for servers that require
    /// one (`tls-auth-clients yes`).
    pub(crate) client: Option<(Vec<u8>, Vec<u8>)>,
}

/// Environment variables `LockConfig::from_env` reads beside `REDIS_URL`:
/// files holding the PEM of each part.
pub(crate) const CA_FILE_VAR: &str = "REDIS_TLS_CA_FILE";
/// See [`CA_FILE_VAR`].
pub(crate) const CERT_FILE_VAR: &str = "REDIS_TLS_CERT_FILE";
/// See [`CA_FILE_VAR`].
pub(crate) const KEY_FILE_VAR: &str = "REDIS_TLS_KEY_FILE";

impl TlsSettings {
    /// Whether any certificate was given.
    pub(crate) fn is_set(&self) -> bool {
        self.root_ca.is_some() || self.client.is_some()
    }

    /// Reads the files the environment names; a client certificate needs
    /// both its certificate and its key.
    pub(crate) fn from_env() -> Result<Self, LockError> {
        let read = |var: &str| -> Result<Option<Vec<u8>>, LockError> {
            match std::env::var_os(var) {
                None => Ok(None),
                Some(path) => std::fs::read(&path).map(Some).map_err(|err| {
                    LockError::config(format!("{var}: cannot read {}: {err}", path.display()))
                }),
            }
        };
        let root_ca = read(CA_FILE_VAR)?;
        let client = match (read(CERT_FILE_VAR)?, read(KEY_FILE_VAR)?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(LockError::config(format!(
                    "{CERT_FILE_VAR} and {KEY_FILE_VAR} go together: a client certificate needs its key"
                )));
            }
        };
        Ok(Self { root_ca, client })
    }

    /// The `redis` crate's form of these settings.
    #[cfg(feature = "tls")]
    pub(crate) fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .client
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.root_ca.clone(),
        }
    }
}

/// Never prints a certificate or a key: only which parts are set.
impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |part: bool| if part { "<set>" } else { "<none>" };
        f.debug_struct("TlsSettings")
            .field("root_ca", &set(self.root_ca.is_some()))
            .field("client_cert", &set(self.client.is_some()))
            .finish()
    }
}

/// A `rediss` URL is a [`LockError::Config`] naming the feature in a build
/// without TLS (the `redis` crate alone would only say TLS is not enabled).
pub(crate) fn check_scheme(url: &str) -> Result<(), LockError> {
    let tls = url
        .get(..6)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("rediss"));
    if tls && !cfg!(feature = "tls") {
        return Err(tls_unsupported("a `rediss` URL"));
    }
    Ok(())
}

/// A TLS address or setting in a build without the `tls` feature.
pub(crate) fn tls_unsupported(what: &str) -> LockError {
    LockError::config(format!(
        "{what} needs TLS, which this build lacks: enable the `tls` feature of lock-runtime \
         (`lock-runtime = {{ version = \"0.1\", features = [\"tls\"] }}`)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_which_parts_are_set_never_their_contents() {
        let settings = TlsSettings {
            root_ca: Some(b"-----BEGIN CERTIFICATE-----secret-ca".to_vec()),
            client: Some((b"cert-body".to_vec(), b"key-body".to_vec())),
        };
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("secret-ca") && !shown.contains("key-body"),
            "{shown}"
        );
        assert!(shown.contains("<set>"), "{shown}");
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn without_the_feature_tls_is_a_config_error_naming_it() {
        use crate::LockConfig;
        for url in [
            "rediss://127.0.0.1:6380/",
            "REDISS://127.0.0.1:6380/#insecure",
            "rediss+redlock://a:1,b:2,c:3",
        ] {
            let err = LockConfig::from_url(url).unwrap_err();
            assert!(
                matches!(&err, LockError::Config(text) if text.contains("`tls` feature")),
                "{url}: {err:?}"
            );
        }
        let err = LockConfig::redlock(["redis://a", "rediss://b", "redis://c"]).unwrap_err();
        assert!(err.to_string().contains("`tls` feature"), "{err}");
        let with_ca = LockConfig::from_url("redis://127.0.0.1/")
            .unwrap()
            .tls_root_ca(b"pem".to_vec());
        let err = with_ca.validate().unwrap_err();
        assert!(err.to_string().contains("`tls` feature"), "{err}");
    }
}
