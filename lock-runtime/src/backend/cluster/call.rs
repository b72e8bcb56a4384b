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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cluster::scripts;

    fn words(command: &redis::Cmd) -> Vec<String> {
        command
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => "<not simple>".to_owned(),
            })
            .collect()
    }

    #[test]
    fn keys_come_before_arguments_whatever_the_order_they_were_added() {
        let mut call = ScriptCall::new(&scripts::EXTEND);
        call.key("lock:{a}").arg("t1").arg(100_u64);
        call.key("lock:{a}:x").arg("t2").arg(200_u64);
        let by_hash = call.command("EVALSHA", &scripts::EXTEND.hash);
        assert_eq!(
            words(&by_hash),
            [
                "EVALSHA",
                scripts::EXTEND.hash.as_str(),
                "2",
                "lock:{a}",
                "lock:{a}:x",
                "t1",
                "100",
                "t2",
                "200"
            ]
        );
        let in_full = call.command("EVAL", scripts::EXTEND.source);
        assert_eq!(words(&in_full)[1], scripts::EXTEND.source);
        assert_eq!(words(&in_full)[2..], words(&by_hash)[2..]);
    }

    #[test]
    fn the_hash_is_the_sha1_of_the_source() {
        let script = redis::Script::new(crate::scripts::ACQUIRE_SOURCE);
        assert_eq!(scripts::ACQUIRE.hash, script.get_hash());
        assert_eq!(
            scripts::ACQUIRE.hash,
            crate::scripts::ACQUIRE.get_hash(),
            "the cluster and single-server acquire scripts differ"
        );
    }
}
