//! A Lua script call, as every topology runs it: by SHA (`EVALSHA`), and in
//! full (`EVAL`) on a node that answers `NOSCRIPT` (restarted, flushed, or
//! new to a slot). `EVAL` runs the script and caches it on that node in one
//! round trip, and touches no other node: a `SCRIPT LOAD` on every node
//! would let one frozen node stall the locks of all the others.
//!
//! A script that node topologies run also has a *twin*: the same steps in
//! Rust over the in-memory store's keyspace, with the same answers
//! ([`LuaScript::with_twin`]). The primitive writes both side by side, and
//! the conformance suite holds every backend to the same behaviour.

use std::sync::OnceLock;

use redis::Cmd;

use crate::memory::words::{Word, Words};
use crate::memory::{MemoryStore, Twin};

use super::resp::write_bulk;

/// A script's Lua and its SHA1, computed once, and its twin.
pub(crate) struct LuaScript {
    source: &'static str,
    hash: String,
    twin: Option<Twin>,
}

impl LuaScript {
    /// The script `source`.
    pub(crate) fn new(source: &'static str) -> Self {
        Self {
            source,
            hash: redis::Script::new(source).get_hash().to_owned(),
            twin: None,
        }
    }

    /// The script `source`, with `twin` doing the same on the in-memory
    /// store.
    pub(crate) fn with_twin(source: &'static str, twin: Twin) -> Self {
        Self {
            twin: Some(twin),
            ..Self::new(source)
        }
    }

    /// The Lua, for tests that check it against the Rust that reads it.
    #[cfg(test)]
    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    /// A call of this script with no keys or arguments yet.
    pub(crate) fn call(&'static self) -> ScriptCall {
        ScriptCall {
            script: self,
            // Room for a lock call's words (lock names and tokens run to
            // a few dozen bytes); batches of renewals grow past it.
            keys: Words::with_capacity(3, 96),
            args: Words::with_capacity(4, 160),
            by_hash: OnceLock::new(),
        }
    }

    /// `SCRIPT LOAD` of this script, to warm a fresh node.
    pub(crate) fn load_command(&self) -> Cmd {
        let mut command = redis::cmd("SCRIPT");
        command.arg("LOAD").arg(self.source);
        command
    }
}

/// One script with its keys and arguments. The first key routes the call
/// (on a cluster, to the node that serves its slot).
#[derive(Clone)]
pub(crate) struct ScriptCall {
    script: &'static LuaScript,
    keys: Words,
    args: Words,
    /// The `EVALSHA` command, written at its first run: a Redlock round
    /// sends the same one to every master.
    by_hash: OnceLock<Cmd>,
}

impl ScriptCall {
    /// Appends a key (`KEYS[n]`).
    pub(crate) fn key(&mut self, key: &str) -> &mut Self {
        self.keys.push(key);
        self.by_hash.take();
        self
    }

    /// Appends an argument (`ARGV[n]`).
    pub(crate) fn arg(&mut self, arg: impl Word) -> &mut Self {
        self.args.push(arg);
        self.by_hash.take();
        self
    }

    /// `EVALSHA`, the usual form.
    pub(crate) fn by_hash(&self) -> &Cmd {
        self.by_hash.get_or_init(|| self.command(Form::ByHash))
    }

    /// `EVAL` with the whole source, for a node that lacks the script.
    pub(crate) fn in_full(&self) -> Cmd {
        self.command(Form::InFull)
    }

    /// Appends the call in `form`, as RESP (the bytes `Cmd` would pack),
    /// to `out`: a connection that writes its own requests takes it with
    /// no command built, packed and copied first.
    pub(crate) fn write_resp(&self, form: Form, out: &mut Vec<u8>) {
        let (name, script) = self.form(form);
        let words = self.keys.len() + self.args.len();
        // Each word's header (`$`, its length, two line ends) is under 16.
        out.reserve(
            16 * (4 + words)
                + name.len()
                + script.len()
                + self.keys.text_len()
                + self.args.text_len(),
        );
        let mut count = itoa::Buffer::new();
        out.push(b'*');
        out.extend_from_slice(count.format(3 + words).as_bytes());
        out.extend_from_slice(b"\r\n");
        write_bulk(out, name);
        write_bulk(out, script);
        write_bulk(out, count.format(self.keys.len()));
        for word in self.keys.iter().chain(self.args.iter()) {
            write_bulk(out, word);
        }
    }

    /// The command's name and how it names its script.
    fn form(&self, form: Form) -> (&'static str, &'static str) {
        match form {
            Form::ByHash => ("EVALSHA", &self.script.hash),
            Form::InFull => ("EVAL", self.script.source),
        }
    }

    fn command(&self, form: Form) -> Cmd {
        let (name, script) = self.form(form);
        // Sized up front: growing the buffers costs more than the call's
        // other allocations together.
        let args = 3 + self.keys.len() + self.args.len();
        let bytes = name.len() + script.len() + 20 + self.keys.text_len() + self.args.text_len();
        let mut command = Cmd::with_capacity(args, bytes);
        command.arg(name).arg(script).arg(self.keys.len());
        for word in self.keys.iter().chain(self.args.iter()) {
            command.arg(word);
        }
        command
    }

    /// Runs the call's twin on `store`.
    pub(crate) fn run_native(&self, store: &MemoryStore) -> Result<redis::Value, String> {
        let twin = self
            .script
            .twin
            .ok_or("this script has no in-memory twin")?;
        store.execute(twin, &self.keys, &self.args)
    }
}

/// How a script call names its script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `EVALSHA` and the script's SHA1, the usual form.
    ByHash,
    /// `EVAL` and the whole source, for a node that lacks the script.
    InFull,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::LazyLock;

    static ECHO: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new("return ARGV[1]"));

    fn words(command: &Cmd) -> Vec<String> {
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
        let mut call = ECHO.call();
        call.key("lock:{a}").arg("t1").arg(100_u64);
        call.key("lock:{a}:x").arg("t2");
        assert_eq!(
            words(call.by_hash()),
            [
                "EVALSHA",
                ECHO.hash.as_str(),
                "2",
                "lock:{a}",
                "lock:{a}:x",
                "t1",
                "100",
                "t2"
            ]
        );
        let in_full = words(&call.in_full());
        assert_eq!(in_full[1], "return ARGV[1]");
        assert_eq!(in_full[2..], words(call.by_hash())[2..]);
    }

    #[test]
    fn the_written_resp_is_the_packed_command() {
        let mut call = ECHO.call();
        call.key("lock:{a}").arg("t1").arg(100_u64).arg("").arg("é");
        let forms = [
            (Form::ByHash, call.by_hash().clone()),
            (Form::InFull, call.in_full()),
        ];
        for (form, command) in forms {
            let mut out = b"before".to_vec();
            call.write_resp(form, &mut out);
            assert_eq!(out[..6], *b"before");
            assert_eq!(
                String::from_utf8_lossy(&out[6..]),
                String::from_utf8_lossy(&command.get_packed_command())
            );
        }
    }

    #[test]
    fn the_hash_is_the_sha1_of_the_source() {
        assert_eq!(ECHO.hash, redis::Script::new("return ARGV[1]").get_hash());
    }
}
