//! [`LockConnection`]: a connection the lock's requests run on, its
//! script calls and its plain commands. Most send them as redis-rs's
//! `Cmd` and `Pipeline`; a connection that writes its own requests
//! ([`super::direct`]) takes their RESP as it is written, with no command
//! built, packed and copied first.

use std::future::Future;

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use super::plain::PlainCommands;
use super::script::{Form, ScriptCall};

/// A connection the lock's requests run on (see the module's doc).
pub(crate) trait LockConnection: ConnectionLike + Send + Sized {
    /// Sends `call` in `form` and answers its reply as read: an error
    /// reply is not raised yet.
    fn send_script<'a>(
        &'a mut self,
        call: &'a ScriptCall,
        form: Form,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'a {
        async move {
            match form {
                Form::ByHash => self.req_packed_command(call.by_hash()).await,
                Form::InFull => self.req_packed_command(&call.in_full()).await,
            }
        }
    }

    /// Sends `plain` and answers its replies, in order, as one array: an
    /// error reply is not raised yet.
    fn send_plain<'a>(
        &'a mut self,
        plain: &'a PlainCommands,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'a {
        async move {
            let pipeline = plain.pipeline();
            let replies = self.req_packed_commands(&pipeline, 0, plain.len()).await?;
            Ok(Value::Array(replies))
        }
    }
}

impl LockConnection for redis::aio::ConnectionManager {}

#[cfg(feature = "cluster")]
impl LockConnection for redis::cluster_async::ClusterConnection {}
