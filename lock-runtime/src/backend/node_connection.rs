//! One pooled connection to a server: a [`DirectConnection`] where the
//! URL allows one (plain TCP, RESP2), redis-rs's `ConnectionManager`
//! otherwise (TLS, Unix sockets, RESP3).

use std::future::Future;

use futures_util::future::Either;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use super::direct::DirectConnection;
use super::lock_connection::LockConnection;
use super::plain::PlainCommands;
use super::script::{Form, ScriptCall};

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

impl LockConnection for NodeConnection {
    fn send_script<'a>(
        &'a mut self,
        call: &'a ScriptCall,
        form: Form,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'a {
        match self {
            Self::Direct(connection) => Either::Left(connection.send_script(call, form)),
            Self::Managed(connection) => Either::Right(connection.send_script(call, form)),
        }
    }

    fn send_plain<'a>(
        &'a mut self,
        plain: &'a PlainCommands,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'a {
        match self {
            Self::Direct(connection) => Either::Left(connection.send_plain(plain)),
            Self::Managed(connection) => Either::Right(connection.send_plain(plain)),
        }
    }
}
