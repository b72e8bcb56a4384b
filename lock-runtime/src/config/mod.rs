//! [`LockConfig`]: where the locks live and the defaults every lock starts from.

use std::fmt;
use std::time::Duration;

mod replicas;
pub(crate) mod rules;
pub(crate) mod tls;
mod topology;

pub(crate) use replicas::ReplicaAck;
pub(crate) use topology::{StoreName, Topology};

use crate::error::LockError;

/// Where and how a [`Locker`](crate::Locker) keeps its locks.
///
/// Built from a URL (or the `REDIS_URL` environment variable) and refined with
/// the chainable setters. The URL also chooses the deployment, so the same
/// code runs on one server, a Cluster, behind Sentinel or on Redlock masters:
///
/// | URL | locks live on |
/// |---|---|
/// | `redis://host:port/db` | one server |
/// | `redis+cluster://host:port,host:port` | a Redis Cluster (feature `cluster`) |
/// | `redis+sentinel://host:port,host:port/<master>` | the master Sentinel names (feature `sentinel`) |
/// | `redis+redlock://host:port,host:port,host:port` | a majority of independent masters |
/// | `memory://` | this process's in-memory store, no Redis ([`LockConfig::in_memory`]) |
///
/// Each deployment's behaviour, requirements and caveats are in the guide
/// page [`guide::deployments`](crate::guide::deployments).
///
/// Nothing is checked against the server until
/// [`Locker::connect`](crate::Locker::connect); [`LockConfig::validate`] runs
/// there and reports the first bad value as [`LockError::Config`].
///
/// | setting | default | |
/// |---|---|---|
/// | [`key_prefix`](LockConfig::key_prefix) | `lock:` | prefix of every key written |
/// | [`default_ttl`](LockConfig::default_ttl) | 30 s | lease of a lock that sets none |
/// | [`default_wait`](LockConfig::default_wait) | the lock's ttl | wait of a lock that sets none |
/// | [`pool_size`](LockConfig::pool_size) | 1 | multiplexed connections for lock traffic, used round-robin (plus one for the watchdog's renewals and one for release messages) |
/// | [`connect_timeout`](LockConfig::connect_timeout) | 2 s | bound of one connection attempt |
/// | [`response_timeout`](LockConfig::response_timeout) | 1 s | bound of one command's answer |
/// | [`retry_backoff`](LockConfig::retry_backoff) | 10 ms to 500 ms | jittered backoff between tries, used only when no release message comes |
/// | [`tls_root_ca`](LockConfig::tls_root_ca), [`tls_client_cert`](LockConfig::tls_client_cert) | platform roots, no client certificate | TLS (`tls` feature); [`from_env`](LockConfig::from_env) reads `REDIS_TLS_CA_FILE`, `REDIS_TLS_CERT_FILE`, `REDIS_TLS_KEY_FILE` |
/// | [`holder_label`](LockConfig::holder_label) | host name and pid | who this process is to [`Locker::inspect`](crate::Locker::inspect); carried inside the owner token, so it costs nothing |
/// | [`restart_quarantine`](LockConfig::restart_quarantine) | the default ttl | Redlock: how long a restarted master's grants count only when every master grants |
/// | [`wait_for_replicas`](LockConfig::wait_for_replicas) | off | after acquiring, wait for `n` replicas to confirm (one server or Sentinel) |
///
/// A password holding `?`, `#` or `/` goes in the URL percent-encoded
/// (`?` as `%3F`); unencoded, the URL does not parse, and the
/// [`LockError::Config`] it gets shows no part of the password. Every
/// invalid value (an empty or unparsable URL, a ttl under 10 ms or over a
/// year, pool size 0, zero timeouts, a key prefix containing `{`) is a
/// [`LockError::Config`] whose message says what to fix. Any lock name up
/// to 4 KiB works, braces, spaces and newlines included: inside the hash
/// tag `%` and `}` are escaped, so no two names share a key and a lock and
/// its channel always share a cluster slot.
///
/// ```
/// use lock_runtime::LockConfig;
/// use std::time::Duration;
///
/// let config = LockConfig::from_url("redis://127.0.0.1:6379/")?
///     .key_prefix("orders:lock:")
///     .default_ttl(Duration::from_secs(10))
///     .pool_size(4);
/// assert_eq!(config.get_default_wait(), Duration::from_secs(10));
/// # Ok::<(), lock_runtime::LockError>(())
/// ```
#[derive(Clone)]
pub struct LockConfig {
    pub(crate) topology: Topology,
    pub(crate) key_prefix: String,
    pub(crate) default_ttl: Duration,
    pub(crate) default_wait: Option<Duration>,
    pub(crate) pool_size: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) backoff_min: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) replicas: Option<ReplicaAck>,
    pub(crate) restart_quarantine: Option<Duration>,
    pub(crate) tls: tls::TlsSettings,
    pub(crate) holder_label: Option<String>,
    /// [`LockConfig::sentinel_master_auth`] given for another topology,
    /// reported by `validate`.
    misplaced_master_auth: bool,
}

impl LockConfig {
    /// The key prefix used unless [`LockConfig::key_prefix`] sets another.
    pub const DEFAULT_KEY_PREFIX: &'static str = "lock:";
    /// The lease length used unless [`LockConfig::default_ttl`] sets another.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
    /// Pooled connections used unless [`LockConfig::pool_size`] sets another.
    pub const DEFAULT_POOL_SIZE: usize = 1;
    /// Connect timeout used unless [`LockConfig::connect_timeout`] sets another.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
    /// Response timeout used unless [`LockConfig::response_timeout`] sets another.
    pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

    /// A configuration for the deployment at `url`: one server
    /// (`redis://[user:password@]host[:port][/db]`), or one of the multi-host
    /// forms in the table above. `rediss` instead of `redis` selects TLS
    /// (the `tls` feature; without it, such a URL is a [`LockError::Config`]
    /// naming the feature), and `#insecure` at the end skips verifying the
    /// server's certificate. `memory://` names this process's in-memory
    /// store, and `memory://<name>` a named one (see
    /// [`LockConfig::in_memory`]). Behind sentinels that require a password,
    /// `?sentinel_password=...` (and `&sentinel_username=...`, both
    /// percent-encoded) gives theirs; `user:pass@` is the master's.
    ///
    /// Fails with [`LockError::Config`] when the URL is empty or cannot be parsed.
    ///
    /// ```
    /// use lock_runtime::{LockConfig, LockError};
    ///
    /// assert!(LockConfig::from_url("redis://127.0.0.1/").is_ok());
    /// assert!(LockConfig::from_url("redis+redlock://10.0.0.1,10.0.0.2,10.0.0.3").is_ok());
    /// assert!(LockConfig::from_url(
    ///     "redis+sentinel://orders:pw@10.0.0.1:26379/mymaster?sentinel_password=s3cret"
    /// ).is_ok());
    /// assert!(matches!(LockConfig::from_url(""), Err(LockError::Config(_))));
    /// assert!(matches!(LockConfig::from_url("http://x"), Err(LockError::Config(_))));
    /// ```
    pub fn from_url(url: &str) -> Result<Self, LockError> {
        let url = url.trim();
        if url.is_empty() {
            return Err(LockError::config(
                "the Redis URL is empty; pass one such as `redis://127.0.0.1:6379/`",
            ));
        }
        Ok(Self::for_topology(Topology::parse(url)?))
    }

    /// Redis Cluster reached through `nodes` (any of its nodes; the rest are
    /// discovered), each a `redis://host:port` URL. Needs the `cluster` feature
    /// at [`Locker::connect`](crate::Locker::connect). Every seed is
    /// reached alike: the same user and password, `rediss://` on all or
    /// none, no database number (a cluster has only 0), no unix socket;
    /// seeds that differ are a [`LockError::Config`] at `connect`. How a
    /// Cluster is followed through failovers and slot migrations:
    /// [`guide::deployments`](crate::guide::deployments#redis-cluster).
    ///
    /// ```
    /// let config = lock_runtime::LockConfig::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])?;
    /// # Ok::<(), lock_runtime::LockError>(())
    /// ```
    pub fn cluster<I, S>(nodes: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let nodes = parse_each(nodes, "cluster")?;
        Ok(Self::for_topology(Topology::Cluster { nodes }))
    }

    /// The master that the `sentinels` (`redis://host:26379` URLs) monitor
    /// under `master_name`, followed across failovers. Needs the `sentinel`
    /// feature at [`Locker::connect`](crate::Locker::connect). Credentials
    /// in these URLs are the sentinels'; the master is reached without
    /// any unless [`LockConfig::sentinel_master_auth`] gives its login. A
    /// database for the master goes in [`LockConfig::from_url`]'s
    /// `redis+sentinel://user:pass@h1,h2/<master>/<db>` form, which takes
    /// the sentinels' own credentials in its query
    /// (`?sentinel_password=...`, `&sentinel_username=...`). How a failover
    /// is followed, and what it can lose:
    /// [`guide::deployments`](crate::guide::deployments#sentinel).
    ///
    /// ```
    /// let config = lock_runtime::LockConfig::sentinel(["redis://10.0.0.1:26379"], "orders")?;
    /// # Ok::<(), lock_runtime::LockError>(())
    /// ```
    pub fn sentinel<I, S>(sentinels: I, master_name: &str) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if master_name.is_empty() {
            return Err(LockError::config(
                "the Sentinel master name is empty; pass the name from `sentinel monitor <name> ...`",
            ));
        }
        let sentinels = parse_each(sentinels, "sentinel")?;
        Ok(Self::for_topology(Topology::Sentinel {
            sentinels,
            master: master_name.to_owned(),
            node: redis::RedisConnectionInfo::default(),
        }))
    }

    /// Redlock over independent `masters` (`redis://host:port` URLs, no
    /// replication between them): a lock needs a majority of them. Each
    /// master is listed once; restarted masters are quarantined (see
    /// [`LockConfig::restart_quarantine`]); the whole story is in
    /// [`guide::deployments`](crate::guide::deployments#redlock).
    ///
    /// ```
    /// let config = lock_runtime::LockConfig::redlock([
    ///     "redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379",
    /// ])?;
    /// # Ok::<(), lock_runtime::LockError>(())
    /// ```
    pub fn redlock<I, S>(masters: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let masters = parse_each(masters, "redlock")?;
        Ok(Self::for_topology(Topology::Redlock { masters }))
    }

    pub(crate) fn for_topology(topology: Topology) -> Self {
        Self {
            topology,
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
            default_ttl: Self::DEFAULT_TTL,
            default_wait: None,
            pool_size: Self::DEFAULT_POOL_SIZE,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            response_timeout: Self::DEFAULT_RESPONSE_TIMEOUT,
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(500),
            replicas: None,
            restart_quarantine: None,
            tls: tls::TlsSettings::default(),
            holder_label: None,
            misplaced_master_auth: false,
        }
    }

    /// A configuration from the `REDIS_URL` environment variable, in any
    /// form [`LockConfig::from_url`] accepts (so the deployment can change
    /// without a rebuild).
    ///
    /// With the `tls` feature, it also reads the PEM files that
    /// `REDIS_TLS_CA_FILE` (a private CA, see [`LockConfig::tls_root_ca`]),
    /// `REDIS_TLS_CERT_FILE` and `REDIS_TLS_KEY_FILE` (a client certificate,
    /// see [`LockConfig::tls_client_cert`]) name, when set.
    ///
    /// Fails with [`LockError::Config`] when the variable is unset, not
    /// Unicode, or not a valid Redis URL, or a named file cannot be read.
    pub fn from_env() -> Result<Self, LockError> {
        match std::env::var("REDIS_URL") {
            Ok(url) => {
                let mut config = Self::from_url(&url)?;
                config.tls = tls::TlsSettings::from_env()?;
                Ok(config)
            }
            Err(std::env::VarError::NotPresent) => Err(LockError::config(
                "REDIS_URL is not set; set it to e.g. `redis://127.0.0.1:6379/` or use `LockConfig::from_url`",
            )),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(LockError::config("REDIS_URL is not valid Unicode"))
            }
        }
    }

    /// Prefix of every Redis key this locker writes (default `lock:`), so that
    /// lock keys never collide with the application's own keys.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Lease length of a lock that does not set its own ttl (default 30 s).
    /// With the watchdog on, this is also how long a crashed owner blocks others.
    pub fn default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = ttl;
        self
    }

    /// How long `acquire` waits for a busy lock when the request does not say.
    /// Unset, each lock waits up to its own ttl: the longest a crashed owner
    /// can block it.
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.default_wait = Some(wait);
        self
    }

    /// Number of multiplexed connections the lock traffic is spread over,
    /// round-robin (default 1). The watchdog's renewals use one more, and
    /// waiting for release messages another (opened at the first wait).
    ///
    /// One multiplexed connection pipelines every caller's requests, and
    /// more of them measured slower in the benchmark's `parallel_64`
    /// sweep (each is one more socket to write and read per wake-up). It
    /// also bounds how many acquisitions that wait for replicas (`WAIT`)
    /// run at once: each pool slot has one connection for them. At most
    /// 256.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// Longest time to establish a connection (default 2 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Longest time to wait for the answer to one command (default 1 s).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Bounds of the jittered backoff between tries on a busy lock
    /// (default 10 ms to 500 ms). A waiter normally wakes on the release
    /// message; the backoff only matters when that message is missed.
    pub fn retry_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max;
        self
    }

    /// After each acquisition, wait until `replicas` replicas acknowledged
    /// the lock's write (Redis `WAIT`), for at most `timeout`; if fewer do,
    /// the lock is released and `acquire` fails with
    /// [`LockError::NotReplicated`]. Off by default; a lock request can set
    /// its own with [`LockRequest::wait_for_replicas`](crate::LockRequest::wait_for_replicas).
    ///
    /// Narrows (does not close) the window in which a failover loses a
    /// fresh lock. One server or Sentinel only: a Cluster or Redlock
    /// configuration with it fails at [`Locker::connect`](crate::Locker::connect).
    /// What it costs and what it leaves open:
    /// [`guide::deployments`](crate::guide::deployments#wait-for-replicas).
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = Some(ReplicaAck { replicas, timeout });
        self
    }

    /// Redlock: for how long after a master's start (`uptime_in_seconds`)
    /// its grants count only when every master granted. Default: the
    /// default ttl. A master restarted without persistence forgets the
    /// locks it held; were its grants to count at once, it could form a
    /// second majority with masters the first owner never held, while that
    /// owner's lease still runs on the others (the "delayed restart" of the
    /// Redlock analysis). Every Redlock lease must be at most this long: a
    /// longer default ttl is a [`LockError::Config`] at `connect`, a longer
    /// ttl of a lock one at `acquire`. Other topologies ignore it.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = lock_runtime::LockConfig::from_url("redis+redlock://a:6379,b:6379,c:6379")?
    ///     .restart_quarantine(Duration::from_secs(60));
    /// # Ok::<(), lock_runtime::LockError>(())
    /// ```
    pub fn restart_quarantine(mut self, quarantine: Duration) -> Self {
        self.restart_quarantine = Some(quarantine);
        self
    }

    /// Sentinel: the ACL user (`None`: the default user) and password to
    /// log in to the master the sentinels name, and to the replica that
    /// replaces it after a failover (the credentials in the sentinels'
    /// URLs are the sentinels' own). The same as `user:pass@` in a
    /// `redis+sentinel://` URL. Any other deployment takes its credentials
    /// in its URLs: set here, it is a [`LockError::Config`] at `connect`.
    ///
    /// ```
    /// let config = lock_runtime::LockConfig::sentinel(["redis://:sentinel-pw@10.0.0.1:26379"], "orders")?
    ///     .sentinel_master_auth(Some("orders"), "orders-pw");
    /// # Ok::<(), lock_runtime::LockError>(())
    /// ```
    pub fn sentinel_master_auth(mut self, username: Option<&str>, password: &str) -> Self {
        match &mut self.topology {
            Topology::Sentinel { node, .. } => {
                // A fresh login: a user named in the URL does not stay
                // beside `None`. The database and protocol are no part of it.
                let mut login = redis::RedisConnectionInfo::default()
                    .set_db(node.db())
                    .set_protocol(node.protocol())
                    .set_password(password);
                if let Some(username) = username {
                    login = login.set_username(username);
                }
                *node = login;
            }
            _ => self.misplaced_master_auth = true,
        }
        self
    }

    /// TLS: trust the CA certificates in `pem` (PEM) instead of the
    /// built-in roots, for servers whose certificates a private CA signed.
    /// Applies to every server of the deployment reached with `rediss`.
    /// Needs the `tls` feature ([`LockError::Config`] at `connect` without
    /// it). `from_env` reads it from the file `REDIS_TLS_CA_FILE` names.
    /// PEM holding no certificate (a path instead of the file's contents,
    /// an empty file, a key) is a [`LockError::Config`] at `connect`. TLS on
    /// each deployment, and what `#insecure` gives up:
    /// [`guide::deployments`](crate::guide::deployments#tls).
    ///
    /// ```no_run
    /// let config = lock_runtime::LockConfig::from_url("rediss://redis.internal:6380/")?
    ///     .tls_root_ca(std::fs::read("/etc/redis/ca.pem").unwrap());
    /// # Ok::<(), lock_runtime::LockError>(())
    /// ```
    pub fn tls_root_ca(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_ca = Some(pem.into());
        self
    }

    /// TLS: present this client certificate chain and private key (both
    /// PEM), for servers that require one (`tls-auth-clients yes`). Needs the
    /// `tls` feature. `from_env` reads them from the files
    /// `REDIS_TLS_CERT_FILE` and `REDIS_TLS_KEY_FILE` name. A chain with
    /// no certificate or a key PEM with no private key is a
    /// [`LockError::Config`] at `connect`.
    pub fn tls_client_cert(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Who this process is to whoever inspects its locks
    /// ([`Locker::inspect`](crate::Locker::inspect)): default, the host name
    /// and process id (`web-3:4711`). Set it to something an operator
    /// recognises (a pod name, a job id). It travels inside every owner
    /// token, so it costs no extra command; at most 128 bytes, no control
    /// characters ([`LockError::Config`] at `connect` otherwise).
    ///
    /// ```
    /// let config = lock_runtime::LockConfig::in_memory().holder_label("checkout-7d9f");
    /// ```
    pub fn holder_label(mut self, label: impl Into<String>) -> Self {
        self.holder_label = Some(label.into());
        self
    }

    /// The key prefix in force.
    pub fn get_key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// The default lease length in force.
    pub fn get_default_ttl(&self) -> Duration {
        self.default_ttl
    }

    /// The default wait in force for a lock that sets neither wait nor ttl
    /// (a lock that sets its ttl waits up to that ttl unless this was set).
    pub fn get_default_wait(&self) -> Duration {
        self.default_wait.unwrap_or(self.default_ttl)
    }

    /// The pool size in force.
    pub fn get_pool_size(&self) -> usize {
        self.pool_size
    }

    /// Checks every value and says what to fix in the first bad one. [`Locker::connect`](crate::Locker::connect)
    /// calls it, so calling it yourself is only needed to fail earlier.
    ///
    /// ```
    /// use lock_runtime::{LockConfig, LockError};
    /// use std::time::Duration;
    ///
    /// let config = LockConfig::from_url("redis://127.0.0.1/")?.default_ttl(Duration::ZERO);
    /// assert!(matches!(config.validate(), Err(LockError::Config(_))));
    /// # Ok::<(), LockError>(())
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        rules::check_ttl(self.default_ttl, "default_ttl")?;
        if self.misplaced_master_auth {
            return Err(LockError::config(format!(
                "sentinel_master_auth is for a Sentinel deployment, not a `{}` one; put the credentials in its URL (`redis://user:password@host:port`)",
                self.topology.kind()
            )));
        }
        if self.tls.is_set() && !cfg!(feature = "tls") {
            return Err(tls::tls_unsupported("a TLS certificate setting"));
        }
        if self.tls.is_set() {
            self.topology.check_tls_for_certificates()?;
        }
        #[cfg(feature = "tls")]
        self.tls.check()?;
        rules::check_prefix(&self.key_prefix)?;
        if let Some(label) = &self.holder_label {
            rules::check_holder_label(label)?;
        }
        if self.pool_size == 0 || self.pool_size > rules::MAX_POOL_SIZE {
            return Err(LockError::config(format!(
                "pool_size is {}; it must be from 1 to {}: it is the number of connections lock traffic uses",
                self.pool_size,
                rules::MAX_POOL_SIZE
            )));
        }
        // Above a day, a timeout is a typo (and clock arithmetic would
        // eventually overflow).
        let day = Duration::from_secs(24 * 3600);
        if self.connect_timeout.is_zero() || self.connect_timeout > day {
            return Err(LockError::config(
                "connect_timeout must be greater than zero and at most a day",
            ));
        }
        if self.response_timeout.is_zero() || self.response_timeout > day {
            return Err(LockError::config(
                "response_timeout must be greater than zero and at most a day",
            ));
        }
        if let Some(ack) = self.replicas {
            self.topology.check_replicas(ack)?;
        }
        if let Topology::Redlock { masters } = &self.topology {
            rules::check_quarantine(self.default_ttl, self.quarantine(), "the default ttl")?;
            rules::check_distinct_masters(masters)?;
        }
        if let Topology::Redlock { masters } = &self.topology
            && masters.len() < 3
        {
            return Err(LockError::config(format!(
                "Redlock needs at least 3 independent masters (got {}): with fewer, one failure stops every lock",
                masters.len()
            )));
        }
        if let Topology::Cluster { nodes } = &self.topology {
            rules::check_cluster_seeds(nodes)?;
        }
        if let Topology::Cluster { nodes } | Topology::Redlock { masters: nodes } = &self.topology
            && nodes.is_empty()
        {
            return Err(LockError::config("the list of Redis nodes is empty"));
        }
        if let Topology::Sentinel { sentinels, .. } = &self.topology
            && sentinels.is_empty()
        {
            return Err(LockError::config("the list of sentinels is empty"));
        }
        if self.backoff_min.is_zero()
            || self.backoff_min > self.backoff_max
            || self.backoff_max > day
        {
            return Err(LockError::config(
                "retry_backoff needs 0 < min <= max <= a day, e.g. (10ms, 500ms)",
            ));
        }
        Ok(())
    }
}

impl LockConfig {
    /// The holder label in force (see [`LockConfig::holder_label`]).
    pub(crate) fn holder(&self) -> String {
        self.holder_label
            .clone()
            .unwrap_or_else(crate::owner::default_label)
    }

    /// Redlock's restart quarantine in force.
    pub(crate) fn quarantine(&self) -> Duration {
        self.restart_quarantine.unwrap_or(self.default_ttl)
    }

    /// The bound of one call: reconnecting, then waiting for the answer.
    pub(crate) fn call_bound(&self) -> Duration {
        self.connect_timeout + self.response_timeout
    }

    /// The bound of an operation of up to two calls (a release, a
    /// clean-up, an inspection; an acquisition's besides its waits): the
    /// one timer its calls run under.
    pub(crate) fn two_calls_bound(&self) -> Duration {
        self.call_bound() * 2
    }
}

impl fmt::Debug for LockConfig {
    // Hand-written so that a password in the URL never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockConfig")
            .field("topology", &self.topology.kind())
            .field("servers", &self.topology.addresses())
            .field("key_prefix", &self.key_prefix)
            .field("default_ttl", &self.default_ttl)
            .field("default_wait", &self.get_default_wait())
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("replicas", &self.replicas)
            .field("restart_quarantine", &self.quarantine())
            .field("holder_label", &self.holder_label)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// Parses each node URL of a multi-node topology.
fn parse_each<I, S>(urls: I, what: &str) -> Result<Vec<redis::ConnectionInfo>, LockError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    use redis::IntoConnectionInfo;
    urls.into_iter()
        .map(|url| {
            let url = url.as_ref().trim();
            tls::check_scheme(url)?;
            topology::check_password_encoded(url)?;
            topology::check_query(url, false)?;
            url.into_connection_info().map_err(|err| {
                topology::slash_in_password(url).unwrap_or_else(|| {
                    LockError::config(format!(
                        "cannot parse the {what} node URL `{}` ({err}); expected `redis://host:port`",
                        redact(url)
                    ))
                })
            })
        })
        .collect()
}

/// The URL with any `user:password@` part and any query masked. A URL
/// mistyped without `://` (`redis:/u:pw@h`, `u:pw@h`) is masked up to its
/// last `@` all the same: that is where the password would be. A query is
/// dropped whole: a socket URL carries its password there
/// (`unix:///s.sock?pass=..`).
///
/// The credentials end at the *last* `@`, looked for before the query is
/// cut off: a password may hold an unencoded `?` (`u:Zq7?x@h`), and
/// cutting at that `?` first would print the password up to it. When a
/// `?` comes before the last `@`, either the `?` is in the password or the
/// `@` is in a socket URL's query (`?pass=se@cret`); the two cannot be
/// told apart, so nothing after the scheme is shown.
fn redact(url: &str) -> String {
    let start = url.find("://").map_or(0, |end| end + 3);
    let (scheme, rest) = url.split_at(start);
    match (rest.rfind('@'), rest.find('?')) {
        (Some(at), None) => format!("{scheme}***{}", &rest[at..]),
        (Some(at), Some(query)) if at < query => {
            format!("{scheme}***{}?***", &rest[at..query])
        }
        (Some(_), Some(_)) => format!("{scheme}***"),
        (None, Some(query)) => format!("{scheme}{}?***", &rest[..query]),
        (None, None) => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials() {
        assert_eq!(redact("redis://u:secret@h:1/"), "redis://***@h:1/");
        assert_eq!(redact("redis://h:1/"), "redis://h:1/");
        assert_eq!(redact("redis://u:p@ss@h:1/"), "redis://***@h:1/");
        // Mistyped: no `://` to tell where credentials start.
        assert_eq!(redact("redis:/u:secret@h:1/"), "***@h:1/");
        assert_eq!(redact("redis//u:secret@h:1/"), "***@h:1/");
        assert_eq!(redact("u:secret@h:1"), "***@h:1");
        // A socket's password rides in the query.
        assert_eq!(
            redact("redis+unix:///run/redis.sock?pass=secret"),
            "redis+unix:///run/redis.sock?***"
        );
        assert_eq!(
            redact("redis://u:secret@h:1/?protocol=3"),
            "redis://***@h:1/?***"
        );
    }

    #[test]
    fn no_part_of_a_password_is_shown_whatever_it_holds() {
        for url in [
            // An unencoded `?`, `#`, `/` or `@` in the password.
            "redis://orders:Zq7secret?tail@h:1/",
            "redis://orders:Zq7secret#tail@h:1/",
            "redis://orders:Zq7secret/tail@h:1/",
            "redis://orders:Zq7secret@tail@h:1/",
            "rediss+cluster://orders:Zq7secret?tail@h:1,h:2/#insecure",
            "redis+sentinel://orders:Zq7secret?tail@h:1,h:2/mymaster/2",
            "redis+redlock://:Zq7secret?tail@h:1,h:2,h:3",
            // Percent-encoded.
            "redis://orders:Zq7secret%3Ftail@h:1/",
            // In a socket URL's query, with or without an `@` in it.
            "unix:///run/redis.sock?db=2&pass=Zq7secret",
            "unix:///run/redis.sock?pass=Zq7secret@tail",
            "redis+unix:///run/redis.sock?user=orders&pass=tail@Zq7secret",
            // Mistyped.
            "orders:Zq7secret?tail@h:1",
        ] {
            let shown = redact(url);
            assert!(
                !shown.contains("Zq7") && !shown.contains("secret") && !shown.contains("tail"),
                "{url}: {shown}"
            );
        }
    }

    #[cfg(feature = "tls")]
    #[test]
    fn certificates_need_every_server_reached_over_tls() {
        let ca = || tls::tests::TEST_CA.as_bytes().to_vec();
        for plain in [
            LockConfig::from_url("redis://h:1/"),
            LockConfig::from_url("redis+cluster://h:1,h:2"),
            LockConfig::from_url("redis+sentinel://h:1/mymaster"),
            LockConfig::redlock(["rediss://h:1", "redis://h:2", "rediss://h:3"]),
        ] {
            let err = plain.unwrap().tls_root_ca(ca()).validate().unwrap_err();
            assert!(err.to_string().contains("rediss://"), "{err}");
        }
        for tls in [
            LockConfig::from_url("rediss://h:1/"),
            LockConfig::from_url("rediss+cluster://h:1,h:2"),
            LockConfig::redlock(["rediss://h:1", "rediss://h:2", "rediss://h:3"]),
            Ok(LockConfig::in_memory()),
        ] {
            let config = tls.unwrap().tls_root_ca(ca());
            assert!(config.validate().is_ok(), "{config:?}");
        }
    }

    #[test]
    fn no_mistyped_url_echoes_its_password() {
        let mistyped = [
            "redis:/u:secret@h:1/",
            "redis//u:secret@h:1/",
            "u:secret@h:1",
            "redis+unx:///run/redis.sock?pass=secret",
            "unix:///run/redis.sock?db=x&pass=secret",
        ];
        for url in mistyped {
            let answers = [
                LockConfig::from_url(url).map(drop),
                LockConfig::cluster([url]).map(drop),
                LockConfig::sentinel([url], "mymaster").map(drop),
                LockConfig::redlock([url, "redis://h:2", "redis://h:3"]).map(drop),
            ];
            // Some take a socket URL as a node; those that refuse it must
            // not echo its password, in text or in Debug.
            let errors: Vec<LockError> = answers.into_iter().filter_map(Result::err).collect();
            assert!(!errors.is_empty(), "{url} was accepted everywhere");
            for err in errors {
                assert!(!err.to_string().contains("secret"), "{url}: {err}");
                assert!(!format!("{err:?}").contains("secret"), "{url}: {err:?}");
            }
        }
    }

    #[test]
    fn parse_error_does_not_echo_the_password() {
        let err = LockConfig::from_url("redis://u:secret@h:notaport/").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn debug_does_not_print_the_password() {
        let config = LockConfig::from_url("redis://u:secret@127.0.0.1:6379/").unwrap();
        assert!(!format!("{config:?}").contains("secret"));
    }

    #[test]
    fn a_sentinel_masters_login_without_a_user_is_the_default_users() {
        // The URL names a user; the login set afterwards names none.
        let config = LockConfig::from_url("redis+sentinel://orders:old@h:26379/m/2")
            .unwrap()
            .sentinel_master_auth(None, "new");
        let Topology::Sentinel { node, .. } = &config.topology else {
            panic!("not Sentinel");
        };
        assert_eq!((node.username(), node.password()), (None, Some("new")));
        assert_eq!(node.db(), 2, "the database is no part of the login");
    }

    #[test]
    fn a_sentinel_masters_login_is_set_on_sentinel_only() {
        let config = LockConfig::sentinel(["redis://h:26379"], "orders")
            .unwrap()
            .sentinel_master_auth(Some("orders"), "secret");
        let Topology::Sentinel { node, .. } = &config.topology else {
            panic!("not Sentinel");
        };
        assert_eq!(
            (node.username(), node.password()),
            (Some("orders"), Some("secret"))
        );
        assert!(config.validate().is_ok());
        assert!(!format!("{config:?}").contains("secret"));
        let config = LockConfig::sentinel(["redis://h:26379"], "orders")
            .unwrap()
            .sentinel_master_auth(None, "pw");
        let Topology::Sentinel { node, .. } = &config.topology else {
            panic!("not Sentinel");
        };
        assert_eq!((node.username(), node.password()), (None, Some("pw")));
        for config in [
            LockConfig::from_url("redis://h:6379").unwrap(),
            LockConfig::cluster(["redis://h:7000"]).unwrap(),
            LockConfig::redlock(["redis://a:1", "redis://b:1", "redis://c:1"]).unwrap(),
            LockConfig::in_memory(),
        ] {
            let err = config
                .sentinel_master_auth(None, "secret")
                .validate()
                .unwrap_err();
            assert!(matches!(err, LockError::Config(_)), "{err:?}");
            assert!(err.to_string().contains("in its URL"), "{err}");
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }

    #[test]
    fn each_bad_value_is_a_config_error() {
        let base = || LockConfig::from_url("redis://127.0.0.1/").unwrap();
        let bad = [
            base().default_ttl(Duration::ZERO),
            base().default_ttl(Duration::from_micros(500)),
            base().default_ttl(Duration::MAX),
            base().pool_size(0),
            base().pool_size(257),
            base().pool_size(usize::MAX),
            base().connect_timeout(Duration::ZERO),
            base().response_timeout(Duration::ZERO),
            base().response_timeout(Duration::MAX),
            base().connect_timeout(Duration::MAX),
            base().retry_backoff(Duration::from_secs(1), Duration::MAX),
            base().retry_backoff(Duration::from_secs(2), Duration::from_secs(1)),
            base().wait_for_replicas(0, Duration::from_secs(1)),
            base().wait_for_replicas(1, Duration::ZERO),
            LockConfig::redlock(["redis://a", "redis://b"]).unwrap(),
            LockConfig::redlock(["redis://a", "redis://b", "redis://c"])
                .unwrap()
                .restart_quarantine(Duration::from_secs(5)),
            LockConfig::cluster(Vec::<String>::new()).unwrap(),
            LockConfig::cluster(["redis://a"])
                .unwrap()
                .wait_for_replicas(1, Duration::from_secs(1)),
        ];
        for config in bad {
            assert!(
                matches!(config.validate(), Err(LockError::Config(_))),
                "{config:?}"
            );
        }
        assert!(base().validate().is_ok());
    }
}
