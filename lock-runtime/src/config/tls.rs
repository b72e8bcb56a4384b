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

    /// Checks that each setting holds what it is for, with the parser the
    /// `redis` crate reads them with. Without this, a CA setting holding no
    /// certificate (a file's path instead of its contents, an empty file,
    /// a key) is taken as an empty trust store, and every connection then
    /// fails blaming the server's certificate (`UnknownIssuer`).
    #[cfg(feature = "tls")]
    pub(crate) fn check(&self) -> Result<(), LockError> {
        if let Some(pem) = &self.root_ca {
            check_root_ca(pem)?;
        }
        if let Some((cert, key)) = &self.client {
            check_client_cert(cert)?;
            check_client_key(key)?;
        }
        Ok(())
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

/// A PEM setting as messages name it: `what` (set through a method), or
/// the file the environment variable `var` names.
#[cfg(feature = "tls")]
fn setting(what: &str, var: &str) -> String {
    format!("{what} (or the file `{var}` names)")
}

/// What a certificate setting must hold, for messages.
#[cfg(feature = "tls")]
const CERTIFICATE_PEM: &str = "the contents of a PEM file with `-----BEGIN CERTIFICATE-----` blocks \
     (read the file, e.g. `std::fs::read(path)?`: a path is not its contents)";

/// The certificates in `pem`, or what is wrong with them; `what` names the
/// setting.
#[cfg(feature = "tls")]
fn certificates(
    pem: &[u8],
    what: &str,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, LockError> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| {
            LockError::config(format!(
                "{what} is not valid PEM ({err}); it must hold {CERTIFICATE_PEM}"
            ))
        })?;
    if certificates.is_empty() {
        return Err(LockError::config(format!(
            "{what} holds no certificate; it must hold {CERTIFICATE_PEM}"
        )));
    }
    Ok(certificates)
}

/// The CA setting holds certificates that can be trust anchors.
#[cfg(feature = "tls")]
fn check_root_ca(pem: &[u8]) -> Result<(), LockError> {
    let what = setting("`tls_root_ca`", CA_FILE_VAR);
    let mut store = rustls::RootCertStore::empty();
    for certificate in certificates(pem, &what)? {
        store.add(certificate).map_err(|err| {
            LockError::config(format!(
                "{what} holds a certificate that cannot be a trust anchor ({err}); \
                 it must hold the CA's certificate"
            ))
        })?;
    }
    Ok(())
}

/// The client certificate setting holds a certificate chain.
#[cfg(feature = "tls")]
fn check_client_cert(pem: &[u8]) -> Result<(), LockError> {
    let what = setting("the certificate of `tls_client_cert`", CERT_FILE_VAR);
    certificates(pem, &what).map(drop)
}

/// The client key setting holds a private key. The parser's error is left
/// out of the message: it may quote a line of the key.
#[cfg(feature = "tls")]
fn check_client_key(pem: &[u8]) -> Result<(), LockError> {
    use rustls::pki_types::{PrivateKeyDer, pem::PemObject};
    PrivateKeyDer::from_pem_slice(pem).map(drop).map_err(|_| {
        LockError::config(format!(
            "{} holds no private key; it must hold the contents of the key's PEM file \
             (`-----BEGIN PRIVATE KEY-----`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`)",
            setting("the key of `tls_client_cert`", KEY_FILE_VAR)
        ))
    })
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
pub(super) mod tests {
    use super::*;

    /// A self-signed CA certificate (valid until 2126), for checks that
    /// parse one; its key was thrown away.
    #[cfg(feature = "tls")]
    pub(crate) const TEST_CA: &str = "\
-----BEGIN CERTIFICATE-----\n\
MIIBnzCCAUWgAwIBAgIUXjOp/ezNNGbyLU1ULb1VXYZS4nwwCgYIKoZIzj0EAwIw\n\
JDEiMCAGA1UEAwwZbG9jay1ydW50aW1lIHVuaXQtdGVzdCBDQTAgFw0yNjExMjUx\n\
MDU0NTNaGA8yMTI2MTEwMTEwNTQ1M1owJDEiMCAGA1UEAwwZbG9jay1ydW50aW1l\n\
IHVuaXQtdGVzdCBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABAy9E8aGqERX\n\
C9XISt6YDeP/fLUmKhwmSX3GrSQI07SKunqRszzsLd1EgyCRybZNjbvmEHMLnG6A\n\
IdA/ve9fbQejUzBRMB0GA1UdDgQWBBR9ueyOsMEGstY63vEpuZnkgeyAMzAfBgNV\n\
HSMEGDAWgBR9ueyOsMEGstY63vEpuZnkgeyAMzAPBgNVHRMBAf8EBTADAQH/MAoG\n\
CCqGSM49BAMCA0gAMEUCIDEExTAvWrtIXjPL2SOWqKOE5FUjquAf2QnTHtHegVSY\n\
AiEA7qSdXitW+3TIdHa5UN1lUf00YnH88GjDxfgyCIuMbDY=\n\
-----END CERTIFICATE-----\n";

    #[cfg(feature = "tls")]
    #[test]
    fn each_pem_setting_must_hold_what_it_is_for() {
        let ca = || TEST_CA.as_bytes().to_vec();
        let check = |root_ca: Option<Vec<u8>>, client: Option<(Vec<u8>, Vec<u8>)>| {
            TlsSettings { root_ca, client }.check()
        };
        assert!(check(Some(ca()), None).is_ok());
        for (bad, names) in [
            (b"/etc/redis/ca.pem".to_vec(), "tls_root_ca"),
            (Vec::new(), "REDIS_TLS_CA_FILE"),
            (b"-----BEGIN CERTIFICATE-----\n".to_vec(), "tls_root_ca"),
        ] {
            let err = check(Some(bad), None).unwrap_err();
            assert!(
                matches!(&err, LockError::Config(text) if text.contains(names)),
                "{err:?}"
            );
        }
        // A certificate where the key goes, and a key where the certificate goes.
        let err = check(None, Some((ca(), ca()))).unwrap_err();
        assert!(err.to_string().contains("the key of"), "{err}");
        let err = check(None, Some((b"cert.pem".to_vec(), ca()))).unwrap_err();
        assert!(err.to_string().contains("the certificate of"), "{err}");
    }

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
