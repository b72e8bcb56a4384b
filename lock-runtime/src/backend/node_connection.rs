//! One pooled connection to a server: a [`DirectConnection`] where the
//! URL allows one (plain TCP, RESP2), redis-rs's `ConnectionManager`
//! otherwise (TLS, Unix sockets, RESP3).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::direct::DirectConnection;

/// A connection of either kind, used as redis-rs's connections are.
#[derive(Clone)]
pub(crate) enum NodeConnection {
    Direct(DirectConnection),
    Managed(ConnectionManager),
}

impl ConnectionLike for NodeConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Direct(connection) => connection.req_packed_command(cmd),
            Self::Managed(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Direct(connection) => connection.req_packed_commands(pipeline, offset, count),
            Self::Managed(connection) => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Direct(connection) => connection.get_db(),
            Self::Managed(connection) => connection.get_db(),
        }
    }
}
