//! Which Redis deployment holds the locks, and how it is written as a URL.
//!
//! | URL | topology |
//! |---|---|
//! | `redis://[user:pass@]host:port[/db]` | one server |
//! | `redis+cluster://[user:pass@]host:port,host:port,...` | Redis Cluster (seed nodes) |
//! | `redis+sentinel://[user:pass@]host:port,.../<master-name>[/db]` | the master that Sentinel names |
//! | `redis+redlock://[user:pass@]host:port,host:port,...[/db]` | Redlock over independent masters |
//! | `memory://[name]` | the in-memory store of this process called `name` ([`crate::memory`]) |
//!
//! `rediss+...` selects TLS. Credentials and database apply to the data
//! nodes (for Sentinel: to the master, not to the sentinels). Sentinels
//! that require a password of their own take it from the query:
//! `redis+sentinel://user:pass@h1,h2/mymaster?sentinel_password=...`
//! (and `sentinel_username=...` for a sentinel ACL user).

use std::fmt;

use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::error::LockError;

/// Which in-memory store of this process a configuration names: data, made
/// into a live store ([`crate::memory::MemoryStore`]) when a locker
/// connects.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum StoreName {
    /// The process-wide store of this name (`memory://<name>`).
    Named(String),
    /// A store of its own, by its number in the process: the one a
    /// configuration was made for, shared by every locker connected with
    /// it (or a clone) while any of them lives.
    Own(u64),
}

impl fmt::Debug for StoreName {
    // As the store itself prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreName::Named(name) => write!(f, "MemoryStore({name:?})"),
            StoreName::Own(_) => f.write_str("MemoryStore"),
        }
    }
}

/// Where the locks live.
#[derive(Clone, Debug)]
pub(crate) enum Topology {
    /// An in-memory store of this process.
    Memory(StoreName),
    /// One server (or anything that speaks to clients like one).
    Single(ConnectionInfo),
    /// A Redis Cluster, reached through any of its nodes.
    Cluster {
        /// Seed nodes; the rest of the cluster is discovered from them.
        nodes: Vec<ConnectionInfo>,
    },
    /// A master found, and followed across failovers, through Sentinel.
    #[cfg_attr(not(feature = "sentinel"), allow(dead_code))]
    Sentinel {
        /// The sentinels to ask.
        sentinels: Vec<ConnectionInfo>,
        /// The name the sentinels monitor the master under.
        master: String,
        /// Credentials and database for the master and its replicas.
        node: redis::RedisConnectionInfo,
    },
    /// Redlock: independent masters, a lock needs a majority of them.
    Redlock {
        /// The masters, each on its own (no replication between them).
        masters: Vec<ConnectionInfo>,
    },
}

impl Topology {
    /// Parses any of the URL forms in the module docs.
    pub(crate) fn parse(url: &str) -> Result<Self, LockError> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(bad_url(url, "it has no `scheme://`"));
        };
        if scheme.eq_ignore_ascii_case("memory") {
            let name = rest.trim_end_matches('/').to_owned();
            return Ok(Topology::Memory(StoreName::Named(name)));
        }
        super::tls::check_scheme(url)?;
        check_password_encoded(url)?;
        let (base, kind) = match scheme.split_once('+') {
            Some((base, kind)) => (base, Some(kind)),
            None => (scheme, None),
        };
        let kind = kind.map(str::to_ascii_lowercase);
        check_query(url, kind.as_deref() == Some("sentinel"))?;
        Self::parse_hosts(url, base, rest, kind.as_deref())
            .map_err(|err| slash_in_password(url).unwrap_or(err))
    }

    /// The hosts, path and query of `url` (`base+kind://rest`).
    fn parse_hosts(
        url: &str,
        base: &str,
        rest: &str,
        kind: Option<&str>,
    ) -> Result<Self, LockError> {
        match kind {
            // `redis+unix://` is redis-rs's own name for a socket.
            None | Some("unix") => Ok(Topology::Single(single_node(url, base)?)),
            Some("cluster") => {
                let hosts = MultiHost::split(url, base, rest)?;
                let (path, query) = hosts.path_and_query();
                if !matches!(path.trim_matches('/'), "" | "0") {
                    return Err(bad_url(
                        url,
                        "a cluster has only database 0; drop the `/<db>` after the hosts",
                    ));
                }
                Ok(Topology::Cluster {
                    nodes: hosts.nodes(url, &with_query("", query))?,
                })
            }
            Some("redlock") => {
                let hosts = MultiHost::split(url, base, rest)?;
                let db = hosts.path.trim_matches('/');
                Ok(Topology::Redlock {
                    masters: hosts.nodes(url, db)?,
                })
            }
            Some("sentinel") => {
                let hosts = MultiHost::split(url, base, rest)?;
                let (path, query) = hosts.path_and_query();
                let mut path = path.trim_matches('/').splitn(2, '/');
                let master = path.next().unwrap_or_default().to_owned();
                if master.is_empty() {
                    return Err(bad_url(
                        url,
                        "name the master after the hosts: `redis+sentinel://h1:26379,h2:26379/mymaster`",
                    ));
                }
                let (query, sentinel_auth) = sentinel_credentials(query);
                let db = with_query(path.next().unwrap_or_default(), query.as_deref());
                // The master's credentials and database ride on a node URL.
                let node = node_info(url, &hosts.node_url(hosts.hosts[0], &db))?
                    .redis_settings()
                    .clone();
                // Sentinels are reached with their own credentials, if any,
                // never with the master's.
                let sentinels = hosts
                    .hosts
                    .iter()
                    .map(|host| {
                        let info = node_info(url, &hosts.node_url_without_auth(host))?;
                        Ok(info.set_redis_settings(sentinel_auth.clone()))
                    })
                    .collect::<Result<_, LockError>>()?;
                Ok(Topology::Sentinel {
                    sentinels,
                    master,
                    node,
                })
            }
            Some(other) => Err(bad_url(
                url,
                &format!("`+{other}` is not a topology; use `+cluster`, `+sentinel` or `+redlock`"),
            )),
        }
    }

    /// Every address this topology names, for logs (never credentials).
    pub(crate) fn addresses(&self) -> Vec<String> {
        let of = |infos: &[ConnectionInfo]| infos.iter().map(|i| i.addr().to_string()).collect();
        match self {
            Topology::Memory(store) => vec![format!("{store:?}")],
            Topology::Single(info) => vec![info.addr().to_string()],
            Topology::Cluster { nodes } => of(nodes),
            Topology::Sentinel { sentinels, .. } => of(sentinels),
            Topology::Redlock { masters } => of(masters),
        }
    }

    /// Certificates are set: every server must be reached over TLS, since
    /// only the URL (`rediss://`) turns TLS on. Certificates beside a plain
    /// URL would otherwise go unused without a word, and the traffic its
    /// user meant to protect would go in clear text. (The in-memory store
    /// has no network.)
    pub(crate) fn check_tls_for_certificates(&self) -> Result<(), LockError> {
        let servers: &[ConnectionInfo] = match self {
            Topology::Memory(_) => return Ok(()),
            Topology::Single(info) => std::slice::from_ref(info),
            Topology::Cluster { nodes } => nodes,
            // The master is reached as its sentinels are.
            Topology::Sentinel { sentinels, .. } => sentinels,
            Topology::Redlock { masters } => masters,
        };
        match servers
            .iter()
            .find(|server| !matches!(server.addr(), redis::ConnectionAddr::TcpTls { .. }))
        {
            Some(plain) => Err(LockError::config(format!(
                "TLS certificates are set, but {} is reached without TLS: use a `rediss://` URL \
                 (certificates never turn TLS on by themselves)",
                plain.addr()
            ))),
            None => Ok(()),
        }
    }

    /// Checks that `ack` is valid and that this topology has replicas to
    /// wait for: one server or Sentinel.
    pub(crate) fn check_replicas(&self, ack: super::ReplicaAck) -> Result<(), LockError> {
        ack.validate()?;
        match self {
            Topology::Cluster { .. } | Topology::Redlock { .. } | Topology::Memory(_) => {
                Err(super::rules::replicas_unsupported(self.kind()))
            }
            Topology::Single(_) | Topology::Sentinel { .. } => Ok(()),
        }
    }

    /// A short name for messages: `memory`, `single`, `cluster`, `sentinel`
    /// or `redlock`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Topology::Memory(_) => "memory",
            Topology::Single(_) => "single",
            Topology::Cluster { .. } => "cluster",
            Topology::Sentinel { .. } => "sentinel",
            Topology::Redlock { .. } => "redlock",
        }
    }
}

/// The parts of a `scheme+kind://[auth@]h1,h2,.../path` URL.
struct MultiHost<'a> {
    base: &'a str,
    auth: Option<&'a str>,
    hosts: Vec<&'a str>,
    path: &'a str,
    /// `#insecure` (or any fragment), given once for every node.
    fragment: Option<&'a str>,
}

impl<'a> MultiHost<'a> {
    fn split(url: &str, base: &str, rest: &'a str) -> Result<Self, LockError> {
        // Schemes are case-insensitive, as for one server's `REDIS://`.
        let base = if base.eq_ignore_ascii_case("redis") {
            "redis"
        } else if base.eq_ignore_ascii_case("rediss") {
            "rediss"
        } else {
            return Err(bad_url(
                url,
                "the scheme must be `redis+...` or `rediss+...`",
            ));
        };
        let (rest, fragment) = match rest.split_once('#') {
            Some((rest, fragment)) => (rest, Some(fragment)),
            None => (rest, None),
        };
        // The hosts end at the path, or at a query given without one
        // (`h1:1,h2:2?protocol=resp3`), as one server's URL allows.
        let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        let (auth, host_list) = match authority.rsplit_once('@') {
            Some((auth, hosts)) => (Some(auth), hosts),
            None => (None, authority),
        };
        let hosts: Vec<&str> = host_list.split(',').map(str::trim).collect();
        if hosts.iter().any(|host| host.is_empty()) {
            return Err(bad_url(url, "list the hosts as `host:port,host:port`"));
        }
        Ok(Self {
            base,
            auth,
            hosts,
            path,
            fragment,
        })
    }

    /// The path after the hosts, and its `?query` if it has one.
    fn path_and_query(&self) -> (&'a str, Option<&'a str>) {
        match self.path.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (self.path, None),
        }
    }

    fn node_url(&self, host: &str, db: &str) -> String {
        let fragment = self.fragment.map(|f| format!("#{f}")).unwrap_or_default();
        match self.auth {
            Some(auth) => format!("{}://{auth}@{host}/{db}{fragment}", self.base),
            None => format!("{}://{host}/{db}{fragment}", self.base),
        }
    }

    /// A sentinel's URL: the master's credentials and database stay off it.
    fn node_url_without_auth(&self, host: &str) -> String {
        let fragment = self.fragment.map(|f| format!("#{f}")).unwrap_or_default();
        format!("{}://{host}/{fragment}", self.base)
    }

    fn nodes(&self, url: &str, db: &str) -> Result<Vec<ConnectionInfo>, LockError> {
        self.hosts
            .iter()
            .map(|host| node_info(url, &self.node_url(host, db)))
            .collect()
    }
}

/// The query parameters of a Sentinel URL that hold the sentinels' own
/// user and password (`requirepass` or an ACL on the sentinels), apart
/// from the master's in `user:pass@`.
const SENTINEL_USERNAME: &str = "sentinel_username";
/// See [`SENTINEL_USERNAME`].
const SENTINEL_PASSWORD: &str = "sentinel_password";

/// Query parameters every URL may carry (read by the `redis` crate).
const QUERY_ANYWHERE: [&str; 1] = ["protocol"];
/// Those a unix socket URL adds (`unix:///s.sock?db=1&pass=..`).
const QUERY_OF_A_SOCKET: [&str; 3] = ["db", "user", "pass"];

/// Whether the URL that starts with `before` reaches a unix socket, in any
/// of the spellings the `redis` crate reads (its schemes are
/// case-insensitive).
fn is_socket(before: &str) -> bool {
    let scheme = before.split_once(':').map_or("", |(scheme, _)| scheme);
    ["unix", "redis+unix", "valkey+unix"]
        .iter()
        .any(|socket| scheme.eq_ignore_ascii_case(socket))
}

/// Refuses a query parameter the URL's form does not read, and one given
/// twice: the `redis` crate ignores both without a word, so `?db=3` would
/// connect to database 0 and a mistyped `?protocl=resp3` would speak
/// RESP2. `sentinel`: the URL is `redis+sentinel://`, whose query also
/// takes the sentinels' credentials. A name that does not look like one
/// (it could be a secret pasted in the wrong place), or any unknown name
/// beside a password (it could be that password's tail), is not shown.
pub(crate) fn check_query(url: &str, sentinel: bool) -> Result<(), LockError> {
    let Some((before, query)) = url.split_once('?') else {
        return Ok(());
    };
    let query = query.split_once('#').map_or(query, |(query, _)| query);
    let socket = is_socket(before);
    // An unencoded `&` in a password makes its tail read as a parameter's
    // name: with a password in the query, no unknown name is shown.
    let holds_password = form_urlencoded::parse(query.as_bytes())
        .any(|(name, _)| name == "pass" || name == SENTINEL_PASSWORD);
    let mut seen = Vec::new();
    for (name, _) in form_urlencoded::parse(query.as_bytes()) {
        let for_sentinels = name == SENTINEL_USERNAME || name == SENTINEL_PASSWORD;
        let known = QUERY_ANYWHERE.contains(&name.as_ref())
            || (socket && QUERY_OF_A_SOCKET.contains(&name.as_ref()))
            || (sentinel && for_sentinels);
        if for_sentinels && !sentinel {
            return Err(bad_url(
                url,
                "`sentinel_username` and `sentinel_password` are for sentinels: \
                 use them in a `redis+sentinel://` URL",
            ));
        }
        if !known {
            let looks_like_a_name =
                name.len() <= 32 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let shown = if looks_like_a_name && !holds_password {
                format!("`{name}`")
            } else {
                "a query parameter".to_owned()
            };
            let hint = if name == "db" {
                "; the database goes in the path: `redis://host:6379/3`"
            } else if holds_password {
                " (an `&` in a password must be percent-encoded, as `%26`)"
            } else {
                ""
            };
            return Err(bad_url(
                url,
                &format!("{shown} is not a setting this URL takes{hint}"),
            ));
        }
        if seen.contains(&name) {
            // A known name: safe to show.
            return Err(bad_url(url, &format!("`{name}` is given twice")));
        }
        seen.push(name);
    }
    Ok(())
}

/// Splits the sentinels' credentials ([`SENTINEL_USERNAME`],
/// [`SENTINEL_PASSWORD`]) off a Sentinel URL's query: they are for the
/// sentinels alone, and the rest of the query (`protocol=resp3`) stays
/// the master's. Values are decoded as the `redis` crate decodes a socket
/// URL's `pass=` (form decoding: percent-escapes, `+` for a space).
fn sentinel_credentials(query: Option<&str>) -> (Option<String>, redis::RedisConnectionInfo) {
    let mut rest = Vec::new();
    let mut auth = redis::RedisConnectionInfo::default();
    for pair in query.into_iter().flat_map(|query| query.split('&')) {
        let decoded = || {
            form_urlencoded::parse(pair.as_bytes())
                .next()
                .map(|(_, value)| value.into_owned())
                .unwrap_or_default()
        };
        match pair.split_once('=') {
            Some((SENTINEL_USERNAME, _)) => auth = auth.set_username(decoded()),
            Some((SENTINEL_PASSWORD, _)) => auth = auth.set_password(decoded()),
            _ => rest.push(pair),
        }
    }
    let rest = (!rest.is_empty()).then(|| rest.join("&"));
    (rest, auth)
}

/// A node URL's path: the database, then the query given after the hosts
/// (`?protocol=resp3`), which every node takes.
fn with_query(db: &str, query: Option<&str>) -> String {
    match query {
        Some(query) => format!("{db}?{query}"),
        None => db.to_owned(),
    }
}

/// Refuses a URL whose password holds an unencoded `?` or `#`. Such a
/// URL often parses all the same, and wrongly: in
/// `redis://orders:1234?x@host/` the authority ends at the `?`, so it
/// names host `orders`, port 1234 (the password's start, then shown in
/// `Debug` and connect errors). The sign: a `?` or `#` inside the
/// authority (before any `/` after the scheme) with an `@` after it. An
/// `@` in a query after the path (`?sentinel_password=p@ss`, a socket's
/// `?pass=`) is the query's own.
pub(crate) fn check_password_encoded(url: &str) -> Result<(), LockError> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let broken = authority
        .find(['?', '#'])
        .is_some_and(|cut| rest[cut..].contains('@'));
    if broken {
        return Err(bad_url(
            url,
            "a `?` or `#` in the password ends the host part early; percent-encode it \
             (`?` as `%3F`, `#` as `%23`)",
        ));
    }
    Ok(())
}

/// Why a URL that did not parse failed, when its password holds an
/// unencoded `/`: the host part then ends at that `/`, and the rest
/// (`34@host:6379/`) reads as a database or a master's name, so the
/// parser's own complaint ("Invalid database number") points elsewhere.
/// The sign: a host part without an `@`, and an `@` after it, before any
/// query. Asked only of a URL that failed, so an `@` a valid URL holds in
/// its path (a Sentinel master's name) is never taken for one.
pub(crate) fn slash_in_password(url: &str) -> Option<LockError> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    let (authority, after) = rest.split_once('/')?;
    (!authority.is_empty() && !authority.contains('@') && after.contains('@')).then(|| {
        bad_url(
            url,
            "a `/` in the password ends the host part early; percent-encode it (`/` as `%2F`)",
        )
    })
}

/// What a Redis URL looks like, for an error about one that is not.
const URL_FORMS: &str = "write `redis://[user:password@]host[:port][/db]` (`rediss://` for TLS, \
     `unix:///path/to/redis.sock` for a socket), a list of hosts after `redis+cluster://`, \
     `redis+sentinel://` or `redis+redlock://`, or `memory://`";

/// One server's URL (`scheme` is its scheme before any `+`), or why it is
/// not one: another scheme (`http://`) is named as such, and the parser's
/// own complaint ("did not parse") comes with what a Redis URL looks like.
fn single_node(url: &str, scheme: &str) -> Result<ConnectionInfo, LockError> {
    const SCHEMES: [&str; 5] = ["redis", "rediss", "valkey", "valkeys", "unix"];
    if !SCHEMES
        .iter()
        .any(|known| scheme.eq_ignore_ascii_case(known))
    {
        return Err(bad_url(
            url,
            &format!("`{scheme}://` is not a Redis URL; {URL_FORMS}"),
        ));
    }
    url.into_connection_info()
        .map_err(|err| bad_url(url, &format!("{err}; {URL_FORMS}")))
}

fn node_info(whole_url: &str, node_url: &str) -> Result<ConnectionInfo, LockError> {
    node_url
        .into_connection_info()
        .map_err(|err| bad_url(whole_url, &err.to_string()))
}

fn bad_url(url: &str, why: &str) -> LockError {
    LockError::config(format!(
        "cannot parse the Redis URL `{}`: {why}",
        super::redact(url)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_server() {
        let Topology::Single(info) = Topology::parse("redis://127.0.0.1:7000/2").unwrap() else {
            panic!("not single");
        };
        assert_eq!(info.addr().to_string(), "127.0.0.1:7000");
        assert_eq!(info.redis_settings().db(), 2);
    }

    #[test]
    fn memory_urls_name_process_wide_stores() {
        let Topology::Memory(shared) = Topology::parse("memory://").unwrap() else {
            panic!("not memory");
        };
        assert_eq!(shared, StoreName::Named(String::new()));
        let named = Topology::parse("MEMORY://orders/").unwrap();
        assert_eq!(named.kind(), "memory");
        assert_eq!(named.addresses(), ["MemoryStore(\"orders\")"]);
        let replicas = super::super::ReplicaAck {
            replicas: 1,
            timeout: std::time::Duration::from_secs(1),
        };
        assert!(matches!(
            named.check_replicas(replicas),
            Err(LockError::Config(_))
        ));
    }

    #[test]
    fn cluster_seeds_carry_credentials() {
        let topology =
            Topology::parse("redis+cluster://u:pw@127.0.0.1:7000,127.0.0.1:7001").unwrap();
        let Topology::Cluster { nodes } = &topology else {
            panic!("not cluster");
        };
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1].redis_settings().password(), Some("pw"));
        assert_eq!(topology.addresses(), ["127.0.0.1:7000", "127.0.0.1:7001"]);
    }

    #[test]
    fn sentinel_names_its_master_and_database() {
        let topology =
            Topology::parse("redis+sentinel://:pw@h1:26379,h2:26380/mymaster/3").unwrap();
        let Topology::Sentinel {
            sentinels,
            master,
            node,
        } = topology
        else {
            panic!("not sentinel");
        };
        assert_eq!(master, "mymaster");
        assert_eq!(node.db(), 3);
        assert_eq!(node.password(), Some("pw"));
        assert_eq!(sentinels.len(), 2);
        assert_eq!(sentinels[0].redis_settings().password(), None);
    }

    #[test]
    fn sentinels_take_their_own_credentials_from_the_query() {
        let url = "redis+sentinel://orders:pw@h1:26379,h2:26380/mymaster/2\
                   ?protocol=resp3&sentinel_username=watch&sentinel_password=s%26c+r%2Bt";
        let Topology::Sentinel {
            sentinels, node, ..
        } = Topology::parse(url).unwrap()
        else {
            panic!("not sentinel");
        };
        assert_eq!(
            (node.username(), node.password()),
            (Some("orders"), Some("pw"))
        );
        assert_eq!(node.db(), 2);
        assert_eq!(node.protocol(), redis::ProtocolVersion::RESP3);
        for sentinel in &sentinels {
            let auth = sentinel.redis_settings();
            assert_eq!(auth.username(), Some("watch"));
            assert_eq!(auth.password(), Some("s&c r+t"));
            assert_eq!(auth.db(), 0);
        }
        // A `%` not followed by two hex digits stays as it is, as redis-rs
        // reads it in a socket URL's `pass=`.
        let Topology::Sentinel { sentinels, .. } =
            Topology::parse("redis+sentinel://h1:26379/mymaster?sentinel_password=100%").unwrap()
        else {
            panic!("not sentinel");
        };
        assert_eq!(sentinels[0].redis_settings().password(), Some("100%"));
        for bad in [
            // Elsewhere they would be ignored.
            "redis://h1:6379/?sentinel_password=pw",
            "redis+cluster://h1:1,h2:2?protocol=3&sentinel_username=watch",
            "redis+redlock://h1:1,h2:2,h3:3/?sentinel_password=pw",
        ] {
            assert!(
                matches!(Topology::parse(bad), Err(LockError::Config(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_query_setting_nobody_reads_is_refused_not_ignored() {
        let refused = |url: &str| match Topology::parse(url) {
            Err(LockError::Config(why)) => why,
            other => panic!("{url}: {other:?}"),
        };
        // What people write for a database, in the wrong place.
        let why = refused("redis://h:6379/?db=3");
        assert!(
            why.contains("`db` is not a setting") && why.contains("/3"),
            "{why}"
        );
        assert!(refused("redis+redlock://a:1,b:2,c:3/?db=4").contains("`db`"));
        assert!(refused("redis+cluster://a:1,b:2?protocl=resp3").contains("`protocl`"));
        assert!(refused("redis://h/?protocol=3&protocol=2").contains("given twice"));
        let sentinel = "redis+sentinel://h:26379/m?sentinel_password=a&sentinel_password=b";
        assert!(refused(sentinel).contains("given twice"));
        // A secret pasted into the query is not echoed.
        let why = refused("redis://h/?hunter2!");
        assert!(!why.contains("hunter2"), "{why}");
        // What the crate reads is still taken, a socket's settings included.
        for url in [
            "redis://h:6379/2?protocol=resp3",
            "unix:///run/redis.sock?db=1&user=u&pass=p",
            "redis+sentinel://h:26379/m/1?protocol=3&sentinel_username=u&sentinel_password=p",
        ] {
            assert!(Topology::parse(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn a_password_cut_by_an_unencoded_ampersand_shows_no_part_of_itself() {
        // The password's tail after the `&` reads as a parameter's name.
        for url in [
            "redis+sentinel://h:26379/mymaster?sentinel_password=Zq7&secret",
            "redis+sentinel://h:26379/mymaster?sentinel_password=Zq7&secret=tail&protocol=3",
            "unix:///run/redis.sock?pass=Zq7&secret",
            "unix:///run/redis.sock?db=1&pass=Zq7&secret=tail",
        ] {
            let Err(LockError::Config(why)) = Topology::parse(url) else {
                panic!("{url} was accepted");
            };
            assert!(
                !why.contains("secret") && !why.contains("tail"),
                "{url}: {why}"
            );
            assert!(why.contains("%26"), "{url}: {why}");
        }
    }

    #[test]
    fn a_socket_url_in_each_spelling_the_redis_crate_reads_keeps_its_query() {
        // Redlock over masters on this machine's sockets.
        let urls = [
            "redis+unix:///run/r1.sock?db=1",
            "valkey+unix:///run/r2.sock?db=2&user=u&pass=p",
            "UNIX:///run/r3.sock?db=3",
        ];
        let config = crate::LockConfig::redlock(urls).unwrap_or_else(|err| panic!("{err}"));
        let Topology::Redlock { masters } = &config.topology else {
            panic!("not Redlock");
        };
        let dbs: Vec<i64> = masters.iter().map(|m| m.redis_settings().db()).collect();
        assert_eq!(dbs, [1, 2, 3]);
        assert!(Topology::parse("UNIX:///run/r3.sock?db=3").is_ok());
    }

    #[test]
    fn a_query_right_after_the_hosts_applies_to_every_node() {
        // As `redis://h:1?protocol=resp3` does for one server.
        let Topology::Cluster { nodes } =
            Topology::parse("redis+cluster://h1:1,h2:2?protocol=resp3").unwrap()
        else {
            panic!("not cluster");
        };
        let Topology::Redlock { masters } =
            Topology::parse("redis+redlock://a:1,b:2,c:3?protocol=resp3").unwrap()
        else {
            panic!("not redlock");
        };
        for node in nodes.iter().chain(&masters) {
            assert_eq!(
                node.redis_settings().protocol(),
                redis::ProtocolVersion::RESP3
            );
        }
    }

    #[test]
    fn redlock_lists_its_masters() {
        let Topology::Redlock { masters } = Topology::parse("redis+redlock://a:1,b:2,c:3").unwrap()
        else {
            panic!("not redlock");
        };
        assert_eq!(masters.len(), 3);
    }

    #[test]
    fn a_query_after_the_hosts_is_no_part_of_the_master_name() {
        let url = "redis+sentinel://:pw@h1:26379,h2:26379/mymaster/3?protocol=resp3";
        let Topology::Sentinel { master, node, .. } = Topology::parse(url).unwrap() else {
            panic!("not sentinel");
        };
        assert_eq!(master, "mymaster");
        assert_eq!(node.db(), 3);
        let bare = "redis+sentinel://h1:26379/mymaster?protocol=resp3";
        let Topology::Sentinel { master, .. } = Topology::parse(bare).unwrap() else {
            panic!("not sentinel");
        };
        assert_eq!(master, "mymaster");
    }

    #[test]
    fn topology_schemes_are_case_insensitive() {
        for url in [
            "REDIS+CLUSTER://h1:1,h2:2",
            "Redis+Redlock://h1:1,h2:2,h3:3",
        ] {
            assert!(Topology::parse(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn bad_forms_are_config_errors() {
        for url in [
            "redis+sentinel://h1:26379",
            "redis+cluster://h1:1,,h2:2",
            // A cluster has one database: a number after it was dropped.
            "redis+cluster://h1:1,h2:2/5",
            "redis+mesh://h1",
            "http+cluster://h1",
            "h1:6379",
        ] {
            assert!(
                matches!(Topology::parse(url), Err(LockError::Config(_))),
                "{url}"
            );
        }
    }
}
