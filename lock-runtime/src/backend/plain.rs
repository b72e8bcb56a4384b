//! [`PlainCommands`]: a few plain commands sent together, in one write
//! and one round trip (a pipeline, never in `MULTI`/`EXEC`).
//!
//! Their words are kept as a script call keeps its own ([`Words`]), so a
//! connection that writes its own requests writes them straight into its
//! outgoing bytes; redis-rs's connections get a `Pipeline` built from
//! them.

use crate::memory::words::{Word, Words};

use super::resp::write_bulk;

/// The most commands one [`PlainCommands`] holds.
const MAX_COMMANDS: usize = 4;

/// Up to four plain commands sent together, in order.
#[derive(Clone, Debug)]
pub(crate) struct PlainCommands {
    words: Words,
    /// Where each command's words start (an index into `words`).
    starts: [usize; MAX_COMMANDS],
    count: usize,
}

impl PlainCommands {
    /// No commands yet, with room for `words` words of `bytes` bytes.
    pub(crate) fn with_capacity(words: usize, bytes: usize) -> Self {
        Self {
            words: Words::with_capacity(words, bytes),
            starts: [0; MAX_COMMANDS],
            count: 0,
        }
    }

    /// Starts the next command, named `name`. Past the fourth, the words
    /// run on in the last command, which the server then refuses: the
    /// lock's own pipelines hold two or three, which their tests check.
    pub(crate) fn command(&mut self, name: &str) -> &mut Self {
        debug_assert!(
            self.count < MAX_COMMANDS,
            "more than {MAX_COMMANDS} commands"
        );
        if self.count < MAX_COMMANDS {
            self.starts[self.count] = self.words.len();
            self.count += 1;
        }
        self.words.push(name);
        self
    }

    /// Appends an argument to the current command.
    pub(crate) fn arg(&mut self, arg: impl Word) -> &mut Self {
        self.words.push(arg);
        self
    }

    /// How many commands there are (and so replies to read).
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The words of the `index`th command (from 0).
    fn command_words(&self, index: usize) -> impl Iterator<Item = &str> {
        let start = self.starts[index];
        let end = match index + 1 {
            next if next < self.count => self.starts[next],
            _ => self.words.len(),
        };
        (start..end).filter_map(|word| self.words.get(word))
    }

    /// Appends the commands, as RESP (the bytes a `Pipeline` would pack),
    /// to `out`.
    pub(crate) fn write_resp(&self, out: &mut Vec<u8>) {
        out.reserve(16 * (self.count + self.words.len()) + self.words.text_len());
        let mut count = itoa::Buffer::new();
        for index in 0..self.count {
            let words = self.command_words(index);
            out.push(b'*');
            out.extend_from_slice(count.format(words.count()).as_bytes());
            out.extend_from_slice(b"\r\n");
            for word in self.command_words(index) {
                write_bulk(out, word);
            }
        }
    }

    /// The commands as a redis-rs pipeline.
    pub(crate) fn pipeline(&self) -> redis::Pipeline {
        let mut pipe = redis::Pipeline::with_capacity(self.count);
        for index in 0..self.count {
            let mut command = redis::Cmd::new();
            for word in self.command_words(index) {
                command.arg(word);
            }
            pipe.add_command(command);
        }
        pipe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_commands() -> PlainCommands {
        let mut plain = PlainCommands::with_capacity(8, 64);
        plain
            .command("SET")
            .arg("lock:{a}")
            .arg("t")
            .arg("NX")
            .arg("PX")
            .arg(1500_u64)
            .command("TIME");
        plain
    }

    #[test]
    fn the_written_resp_is_the_packed_pipeline() {
        let plain = two_commands();
        assert_eq!(plain.len(), 2);
        let mut out = b"before".to_vec();
        plain.write_resp(&mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            format!(
                "before{}",
                String::from_utf8_lossy(&plain.pipeline().get_packed_pipeline())
            )
        );
        assert_eq!(
            String::from_utf8_lossy(&out[6..]),
            "*6\r\n$3\r\nSET\r\n$8\r\nlock:{a}\r\n$1\r\nt\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1500\r\n\
             *1\r\n$4\r\nTIME\r\n"
        );
    }

    #[test]
    fn no_commands_write_nothing() {
        let plain = PlainCommands::with_capacity(0, 0);
        let mut out = Vec::new();
        plain.write_resp(&mut out);
        assert!(out.is_empty());
        assert_eq!(plain.len(), 0);
    }
}
