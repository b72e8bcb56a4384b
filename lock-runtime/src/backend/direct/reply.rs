//! Replies in RESP2, read off a byte buffer that may end mid-reply.
//!
//! The lock's connections speak RESP2 and read only what its commands
//! answer (status, error, integer, bulk string and array replies), so the
//! parser is this small one. Error replies are handed to redis-rs's own
//! parser, the one public way to build its `ServerError`, so that an error
//! read here is the error redis-rs would have made (its code, `NOSCRIPT`
//! or `NOAUTH`, is what the callers look at).

use redis::Value;

/// Nesting deeper than any reply of the lock's commands: a server (or a
/// proxy) that sends more is not one the lock speaks to.
const MAX_DEPTH: usize = 8;

/// The first whole reply at the start of `buffer` and how many bytes it
/// took, `None` when `buffer` ends before the reply does, or a message
/// when the bytes are not RESP2 (the connection is then unusable).
pub(super) fn parse(buffer: &[u8]) -> Result<Option<(Value, usize)>, String> {
    let mut at = 0;
    Ok(value(buffer, &mut at, 0)?.map(|value| (value, at)))
}

/// One reply starting at `*at`, moving `*at` past it.
fn value(buffer: &[u8], at: &mut usize, depth: usize) -> Result<Option<Value>, String> {
    let start = *at;
    let Some(line) = line(buffer, start + 1) else {
        return Ok(None);
    };
    let Some(&kind) = buffer.get(start) else {
        return Ok(None);
    };
    let text = &buffer[start + 1..line];
    *at = line + 2;
    match kind {
        b'+' if text == b"OK" => Ok(Some(Value::Okay)),
        b'+' => Ok(Some(Value::SimpleString(
            String::from_utf8_lossy(text).into_owned(),
        ))),
        b'-' => redis::parse_redis_value(&buffer[start..*at])
            .map(Some)
            .map_err(|err| format!("an error reply redis-rs cannot read: {err}")),
        b':' => Ok(Some(Value::Int(number(text)?))),
        b'$' => {
            let Ok(length) = usize::try_from(number(text)?) else {
                return Ok(Some(Value::Nil));
            };
            let end = *at + length;
            if buffer.len() < end + 2 {
                return Ok(None);
            }
            if &buffer[end..end + 2] != b"\r\n" {
                return Err("a bulk string without its line end".to_owned());
            }
            let bytes = buffer[*at..end].to_vec();
            *at = end + 2;
            Ok(Some(Value::BulkString(bytes)))
        }
        b'*' => {
            let Ok(count) = usize::try_from(number(text)?) else {
                return Ok(Some(Value::Nil));
            };
            if depth == MAX_DEPTH {
                return Err("arrays nested deeper than the lock's replies".to_owned());
            }
            // Each item takes at least three bytes: a count beyond what
            // the buffer could hold is not read into an allocation yet.
            let mut items = Vec::with_capacity(count.min(buffer.len() / 3 + 1));
            for _ in 0..count {
                match value(buffer, at, depth + 1)? {
                    Some(item) => items.push(item),
                    None => return Ok(None),
                }
            }
            Ok(Some(Value::Array(items)))
        }
        other => Err(format!(
            "a reply of type {:?}, which RESP2 does not have",
            char::from(other)
        )),
    }
}

/// Where the line starting at `from` ends (the index of its `\r`), if the
/// buffer holds its end.
fn line(buffer: &[u8], from: usize) -> Option<usize> {
    let rest = buffer.get(from..)?;
    let cr = rest.windows(2).position(|pair| pair == b"\r\n")?;
    Some(from + cr)
}

/// A reply's decimal integer.
fn number(text: &[u8]) -> Result<i64, String> {
    crate::backend::resp::integer(text)
        .ok_or_else(|| format!("{:?} is not a number", String::from_utf8_lossy(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(bytes: &[u8]) -> Value {
        let (value, used) = parse(bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len(), "{bytes:?}");
        value
    }

    #[test]
    fn reads_each_reply_as_redis_rs_does() {
        let replies: [&[u8]; 9] = [
            b"+OK\r\n",
            b"+PONG\r\n",
            b":-42\r\n",
            b"$5\r\nhe\r\no\r\n",
            b"$0\r\n\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n+OK\r\n$-1\r\n",
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
        ];
        for reply in replies {
            assert_eq!(whole(reply), redis::parse_redis_value(reply).unwrap());
        }
        let error = whole(b"-NOSCRIPT No matching script.\r\n");
        let err = error.extract_error().unwrap_err();
        assert_eq!(err.code(), Some("NOSCRIPT"));
    }

    #[test]
    fn a_reply_cut_anywhere_waits_for_the_rest() {
        let reply = b"*3\r\n:1\r\n*2\r\n$5\r\nhello\r\n+OK\r\n-ERR no\r\n";
        for cut in 0..reply.len() {
            assert_eq!(parse(&reply[..cut]), Ok(None), "cut at {cut}");
        }
        whole(reply);
    }

    #[test]
    fn takes_one_reply_of_several() {
        let (value, used) = parse(b":1\r\n:2\r\n").unwrap().unwrap();
        assert_eq!((value, used), (Value::Int(1), 4));
    }

    #[test]
    fn refuses_what_is_not_resp2() {
        assert!(parse(b"%1\r\n").is_err());
        assert!(parse(b":x\r\n").is_err());
        assert!(parse(b"$2\r\nabcd\r\n").is_err());
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1) + ":1\r\n";
        assert!(parse(deep.as_bytes()).is_err());
    }
}
