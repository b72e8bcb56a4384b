//! RESP as the lock's connections write requests and raise the errors in
//! replies, for requests written straight into a connection's outgoing
//! bytes ([`super::script::ScriptCall::write_resp`],
//! [`super::plain::PlainCommands::write_resp`]), and the decimal numbers
//! replies carry, read from their bytes.

use redis::{RedisResult, Value};

/// Appends `word` to `out` as a RESP bulk string. Its callers reserve
/// room for the whole request first, so each piece is one copy.
pub(super) fn write_bulk(out: &mut Vec<u8>, word: &str) {
    let length = word.len();
    // A lock call's words are short: the header (`$`, the length, the line
    // end) is written in one piece, its digits without a formatter's call.
    match u8::try_from(length) {
        Ok(units @ 0..=9) => out.extend_from_slice(&[b'$', b'0' + units, b'\r', b'\n']),
        Ok(tens @ 10..=99) => {
            out.extend_from_slice(&[b'$', b'0' + tens / 10, b'0' + tens % 10, b'\r', b'\n']);
        }
        _ => {
            out.push(b'$');
            out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(word.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `reply`, or the first error reply in it, raised as redis-rs raises a
/// command's error (with its code: `NOSCRIPT`, `READONLY`). The common
/// reply holds none, and is not rebuilt to learn so.
pub(super) fn raised(reply: Value) -> RedisResult<Value> {
    if holds_error(&reply) {
        reply.extract_error()
    } else {
        Ok(reply)
    }
}

/// Whether `reply` is or holds an error reply (or is of a kind RESP2
/// never sends, left to redis-rs to look into).
fn holds_error(reply: &Value) -> bool {
    match reply {
        Value::ServerError(_) => true,
        Value::Array(items) => items.iter().any(holds_error),
        Value::Map(_) | Value::Set(_) | Value::Attribute { .. } | Value::Push { .. } => true,
        _ => false,
    }
}

/// The number `text` writes in decimal, read as `str::parse::<u64>`
/// reads it (an optional `+`, then digits only), or `None`. A lock call's
/// replies carry a few (a fence, a clock, lengths), and reading their
/// bytes directly skips the UTF-8 check and the generic parser.
pub(crate) fn whole_number(text: &[u8]) -> Option<u64> {
    let digits = text.strip_prefix(b"+").unwrap_or(text);
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0_u64, |number, &byte| {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        number.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// The signed number `text` writes in decimal, read as
/// `str::parse::<i64>` reads it, or `None`.
pub(crate) fn integer(text: &[u8]) -> Option<i64> {
    match text.strip_prefix(b"-") {
        // `0 - n`: the magnitude of `i64::MIN` itself is no `i64`.
        Some(magnitude) if !magnitude.starts_with(b"+") => {
            0_i64.checked_sub_unsigned(whole_number(magnitude)?)
        }
        Some(_) => None,
        None => i64::try_from(whole_number(text)?).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_the_standard_parsers_read_them() {
        let texts = [
            "0",
            "7",
            "+7",
            "-7",
            "-0",
            "42",
            "1700000000",
            "999999",
            "18446744073709551615",
            "18446744073709551616",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "",
            "+",
            "-",
            "+-1",
            "-+1",
            "--1",
            "1 ",
            " 1",
            "1a",
            "0x1",
            "١",
        ];
        for text in texts {
            assert_eq!(whole_number(text.as_bytes()), text.parse().ok(), "{text:?}");
            assert_eq!(integer(text.as_bytes()), text.parse().ok(), "{text:?}");
        }
    }

    fn error(reply: &[u8]) -> Value {
        redis::parse_redis_value(reply).unwrap()
    }

    #[test]
    fn a_reply_without_errors_is_kept_as_it_is() {
        let clean = Value::Array(vec![
            Value::Int(1),
            Value::Array(vec![Value::BulkString(b"x".to_vec()), Value::Nil]),
        ]);
        assert_eq!(raised(clean.clone()).unwrap(), clean);
        assert_eq!(raised(Value::Okay).unwrap(), Value::Okay);
    }

    #[test]
    fn the_first_error_is_raised_with_its_code_wherever_it_sits() {
        let noscript = error(b"-NOSCRIPT No matching script\r\n");
        assert_eq!(
            raised(noscript.clone()).unwrap_err().code(),
            Some("NOSCRIPT")
        );
        let readonly = error(b"-READONLY You can't write against a read only replica.\r\n");
        let pipeline = Value::Array(vec![readonly, Value::Int(1), noscript]);
        assert_eq!(raised(pipeline).unwrap_err().code(), Some("READONLY"));
        let nested = Value::Array(vec![Value::Array(vec![error(
            b"-NOREPLICAS Not enough\r\n",
        )])]);
        assert_eq!(raised(nested).unwrap_err().code(), Some("NOREPLICAS"));
    }

    #[test]
    fn a_bulk_string_is_its_length_and_bytes() {
        let mut out = Vec::new();
        write_bulk(&mut out, "");
        write_bulk(&mut out, "é1");
        assert_eq!(out, b"$0\r\n\r\n$3\r\n\xc3\xa91\r\n");
        for length in [9, 10, 99, 100, 255, 256, 1000] {
            let word = "w".repeat(length);
            let mut out = Vec::new();
            write_bulk(&mut out, &word);
            assert_eq!(out, format!("${length}\r\n{word}\r\n").into_bytes());
        }
    }
}
