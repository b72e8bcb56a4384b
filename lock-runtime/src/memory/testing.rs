//! What the twins' unit tests share: arguments written as words, answers
//! read as integers.

use redis::Value;

use super::words::Words;

/// `items` as a script's keys or arguments.
pub(crate) fn strings(items: &[&str]) -> Words {
    items.iter().collect()
}

/// A twin's answer, an integer or an array of them, as integers.
pub(crate) fn ints(value: &Value) -> Vec<i64> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Int(n) => *n,
                other => panic!("not an integer: {other:?}"),
            })
            .collect(),
        Value::Int(n) => vec![*n],
        other => panic!("unexpected answer {other:?}"),
    }
}
