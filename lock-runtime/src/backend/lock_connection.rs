//! [`LockConnection`]: a connection the lock's requests run on, its
//! script calls and its plain commands. Most send them as redis-rs's
//! `Cmd` and `Pipeline`; a connection that writes its own requests
//! ([`super::direct`]) takes their RESP as it is written, with no command
//! built, packed and copied first.

use std::future::Future;

use redis::aio::ConnectionLike;
use redis::{FromRedisValue, RedisResult, Value};

use super::plain::PlainCommands;
use super::resp::raised;
use super::script::{Form, ScriptCall};

/// A connection the lock's requests run on (see the module's doc).
pub(crate) trait LockConnection: ConnectionLike + Send + Sized {
    /// Runs `call`: by SHA, and once more in full if the node lacks the
    /// script (a `NOSCRIPT` answer means it did not run).
    fn run_script<'a, T: FromRedisValue>(
        &'a mut self,
        call: &'a ScriptCall,
    ) -> impl Future<Output = RedisResult<T>> + Send + 'a {
        async move {
            let reply = match self.send_script(call, Form::ByHash).await {
                Ok(reply) => raised(reply),
                Err(err) => Err(err),
            };
            let reply = match reply {
                Err(err) if err.code() == Some("NOSCRIPT") => {
                    raised(self.send_script(call, Form::InFull).await?)
                }
                reply => reply,
            }?;
            Ok(redis::from_redis_value(reply)?)
        }
    }

    /// Runs `plain`; an error reply of any of its commands is the answer
    /// (the first one, with its code).
    fn run_plain<'a, T: FromRedisValue>(
        &'a mut self,
        plain: &'a PlainCommands,
    ) -> impl Future<Output = RedisResult<T>> + Send + 'a {
        async move {
            let replies = raised(self.send_plain(plain).await?)?;
            Ok(redis::from_redis_value(replies)?)
        }
    }

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
