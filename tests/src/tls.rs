//! TLS for the tests: a private certificate authority made at run time with
//! the `openssl` command, and `redis-server`s that speak TLS.
//!
//! A TLS server also keeps a plain-text port on loopback for the test's own
//! reads of its state ([`RedisServer::cmd`] and the fixtures); lockers reach
//! it through [`TlsServer::url`], its TLS port, which speaks nothing else.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::redis_server::free_port;
use crate::{RedisCluster, RedisServer};

static PKI_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A CA, a server certificate for `127.0.0.1` it signed, a client
/// certificate it signed, and for the failure tests a second CA that signed
/// nothing here and an expired server certificate. Files live in a
/// directory of their own, deleted on drop.
#[derive(Debug)]
pub struct TestPki {
    dir: PathBuf,
}

impl TestPki {
    /// Generates every certificate (EC P-256 keys, so it takes
    /// milliseconds).
    ///
    /// # Panics
    ///
    /// If `openssl` is missing or fails.
    pub fn generate() -> Self {
        let counter = PKI_COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("lock-tests-pki-{}-{counter}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let pki = Self { dir };
        pki.make_ca("ca");
        pki.make_ca("other-ca");
        let server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\n\
                          extendedKeyUsage=serverAuth,clientAuth\n";
        pki.make_leaf("server", "ca", "127.0.0.1", server_ext, "30");
        pki.make_leaf(
            "client",
            "ca",
            "lock-client",
            "extendedKeyUsage=clientAuth\n",
            "30",
        );
        // Expired a day before it was made (`-days 0` would still be valid
        // within the second it was made in).
        pki.make_leaf("expired", "ca", "127.0.0.1", server_ext, "-1");
        pki
    }

    /// The path of `name` (`ca.crt`, `server.key`, ...).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The PEM of `name`.
    pub fn pem(&self, name: &str) -> Vec<u8> {
        fs::read(self.path(name)).unwrap_or_else(|e| panic!("read {name}: {e}"))
    }

    fn make_ca(&self, name: &str) {
        openssl(
            &self.dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "30",
                "-subj",
            ],
            &[
                &format!("/CN=lock-tests {name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.crt"),
            ],
        );
    }

    fn make_leaf(&self, name: &str, ca: &str, common_name: &str, extensions: &str, days: &str) {
        let ext = format!("{name}.ext");
        fs::write(self.dir.join(&ext), extensions).expect("write the extensions file");
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-subj",
            ],
            &[
                &format!("/CN={common_name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
            ],
        );
        openssl(
            &self.dir,
            &["x509", "-req", "-CAcreateserial"],
            &[
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &format!("{ca}.crt"),
                "-CAkey",
                &format!("{ca}.key"),
                "-days",
                days,
                "-extfile",
                &ext,
                "-out",
                &format!("{name}.crt"),
            ],
        );
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn openssl(dir: &Path, args: &[&str], more: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .args(more)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("run openssl (install it with `apt-get install -y openssl`): {e}")
        });
    assert!(
        output.status.success(),
        "openssl {args:?} {more:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Whether the server asks clients for a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// None asked (`tls-auth-clients no`).
    None,
    /// Required (`tls-auth-clients yes`): mutual TLS.
    Required,
}

/// A `redis-server` with a TLS port, serving `certificate` (`server` or
/// `expired`) of `pki`.
#[derive(Debug)]
pub struct TlsServer {
    /// The server itself, for faults and for reading its state over its
    /// plain-text loopback port.
    pub server: RedisServer,
    tls_port: u16,
}

impl TlsServer {
    /// Starts a server whose TLS port serves `certificate`.
    pub fn start(pki: &TestPki, certificate: &str, auth: ClientAuth) -> Self {
        let tls_port = free_port();
        let args = tls_args(pki, tls_port, certificate, auth);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self {
            server: RedisServer::start_with(&args),
            tls_port,
        }
    }

    /// The TLS port.
    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// `rediss://127.0.0.1:<tls port>/`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.tls_port)
    }
}

/// The arguments of a server with TLS port `tls_port` serving
/// `certificate`; the cluster bus and replication speak TLS too.
pub(crate) fn tls_args(
    pki: &TestPki,
    tls_port: u16,
    certificate: &str,
    auth: ClientAuth,
) -> Vec<String> {
    let path = |name: &str| pki.path(name).display().to_string();
    let auth = if auth == ClientAuth::Required {
        "yes"
    } else {
        "no"
    };
    [
        ("--tls-port", tls_port.to_string()),
        ("--tls-cert-file", path(&format!("{certificate}.crt"))),
        ("--tls-key-file", path(&format!("{certificate}.key"))),
        ("--tls-ca-cert-file", path("ca.crt")),
        ("--tls-auth-clients", auth.to_owned()),
        ("--tls-cluster", "yes".to_owned()),
        ("--tls-replication", "yes".to_owned()),
    ]
    .into_iter()
    .flat_map(|(name, value)| [name.to_owned(), value])
    .collect()
}

/// A three-node Redis Cluster whose nodes, and bus, speak TLS; a TLS client
/// is told each node's TLS port, a plain one (the test's own reads) its
/// plain port.
#[derive(Debug)]
pub struct TlsCluster {
    /// The cluster itself, for reads of its state.
    pub cluster: RedisCluster,
    tls_ports: Vec<u16>,
}

impl TlsCluster {
    /// Starts and joins the nodes, each serving the `server` certificate.
    pub fn start(pki: &TestPki, auth: ClientAuth) -> Self {
        let mut tls_ports = Vec::new();
        let cluster = RedisCluster::start_with(|| {
            let port = free_port();
            tls_ports.push(port);
            tls_args(pki, port, "server", auth)
        });
        Self { cluster, tls_ports }
    }

    /// `rediss+cluster://` naming every node's TLS port.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .tls_ports
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        format!("rediss+cluster://{}", hosts.join(","))
    }
}
