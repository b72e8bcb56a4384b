//! One script call on the node that serves its first key.

use redis::FromRedisValue;
use redis::cluster_async::ClusterConnection;

use super::scripts::LuaScript;

/// A script with its keys and arguments, sent as `EVALSHA`; after a
/// `NOSCRIPT` (a node restarted or flushed, or new to the slot) it is sent
/// once more as `EVAL`, which runs it and caches it on that node alone.
/// Both are routed by the first key and follow `MOVED`/`ASK`, so the
/// fallback reaches exactly the node that lacked the script.
pub(crate) struct ScriptCall<'a> {
    script: &'a LuaScript,
    keys: Vec<&'a str>,
    args: Vec<String>,
}

impl<'a> ScriptCall<'a> {
    /// A call of `script` with no keys or arguments yet.
    pub(crate) fn new(script: &'a LuaScript) -> Self {
        Self {
            script,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// Appends a key (`KEYS[n]`).
    pub(crate) fn key(&mut self, key: &'a str) -> &mut Self {
        self.keys.push(key);
        self
    }

    /// Appends an argument (`ARGV[n]`).
    pub(crate) fn arg(&mut self, arg: impl ToString) -> &mut Self {
        self.args.push(arg.to_string());
        self
    }

    /// Runs the script: by SHA, or in full where the node lacks it.
    pub(crate) async fn invoke<T: FromRedisValue>(
        &self,
        connection: &mut ClusterConnection,
    ) -> redis::RedisResult<T> {
        let by_hash = self.command("EVALSHA", &self.script.hash);
        match by_hash.query_async(connection).await {
            // NOSCRIPT: the script did not run; nothing to undo.
            Err(err) if err.code() == Some("NOSCRIPT") => {
                self.command("EVAL", self.script.source)
                    .query_async(connection)
                    .await
            }
            answer => answer,
        }
    }

    fn command(&self, name: &str, script: &str) -> redis::Cmd {
        let mut command = redis::cmd(name);
        command
            .arg(script)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        command
    }
}
