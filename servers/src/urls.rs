//! The URLs the lock library takes for a deployment of several servers.

use crate::RedisServer;

/// A multi-host URL of `kind` (`cluster`, `redlock`, `sentinel`) naming
/// every server of `servers`, then `path` (e.g. `/mymaster` for Sentinel):
/// `redis+cluster://127.0.0.1:7001,127.0.0.1:7002`.
pub fn multi_host_url(kind: &str, servers: &[RedisServer], path: &str) -> String {
    let hosts: Vec<String> = servers
        .iter()
        .map(|server| format!("127.0.0.1:{}", server.port()))
        .collect();
    format!("redis+{kind}://{}{path}", hosts.join(","))
}
