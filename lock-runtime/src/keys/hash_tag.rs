//! A lock name inside a Redis hash tag, and back: `%` becomes `%25` and
//! `}` becomes `%7D`, so the name can never end the tag early (see
//! [`crate::keys`] for why the tag matters). The escape is injective, and
//! [`name_of`] undoes it for a whole lock key.

use std::borrow::Cow;

/// `name` with `%` and `}` escaped, so that it can sit inside a hash tag.
pub(crate) fn escape(name: &str) -> Cow<'_, str> {
    if !name.contains(['%', '}']) {
        return name.into();
    }
    let mut escaped = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            '%' => escaped.push_str("%25"),
            '}' => escaped.push_str("%7D"),
            c => escaped.push(c),
        }
    }
    escaped.into()
}

/// The lock name a lock key `<prefix>{<escaped name>}` was made from: the
/// text between the first `{` and the key's final `}`, unescaped. None for
/// a key no lock has (a channel, a counter).
pub(crate) fn name_of(key: &str) -> Option<String> {
    let open = key.find('{')?;
    let tag = key.get(open + 1..)?.strip_suffix('}')?;
    if tag.contains('}') {
        return None;
    }
    unescape(tag)
}

/// The resource name in the hash tag of a key of any primitive: a lock
/// key, or one with a suffix after its tag (`<prefix>{<name>}:fair`, a
/// fair lock's line). None for a key with no tag (a counter).
pub(crate) fn resource_of(key: &str) -> Option<String> {
    let open = key.find('{')?;
    let rest = key.get(open + 1..)?;
    unescape(&rest[..rest.find('}')?])
}

/// `tag` with its escapes undone; None when empty or not an escape's
/// output.
fn unescape(tag: &str) -> Option<String> {
    if tag.is_empty() {
        return None;
    }
    let mut name = String::with_capacity(tag.len());
    let mut rest = tag;
    while let Some(at) = rest.find('%') {
        name.push_str(&rest[..at]);
        let code = rest.get(at..at + 3)?;
        name.push(match code {
            "%25" => '%',
            "%7D" => '}',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    name.push_str(rest);
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_key_gives_back_its_name() {
        for name in ["stock:42", "}x", "a%7Db", "{}", "%", "x\ny z*?["] {
            let key = format!("orders:lock:{{{}}}", escape(name));
            assert_eq!(name_of(&key).as_deref(), Some(name), "{name:?}");
        }
        assert_eq!(escape("}x"), "%7Dx");
        assert_eq!(escape("%7D"), "%257D");
        assert_eq!(name_of("lock:{a}:released"), None);
        assert_eq!(name_of("lock:fence-counter"), None);
        assert_eq!(name_of("lock:{}"), None);
        assert_eq!(name_of("lock:{a%4}"), None);
    }

    #[test]
    fn a_key_of_any_primitive_gives_back_its_resource() {
        for name in ["stock:42", "}x", "a%7Db", "{}", "%"] {
            let lock = format!("orders:lock:{{{}}}", escape(name));
            for key in [
                lock.clone(),
                format!("{lock}:fair"),
                format!("{lock}:fair:q"),
            ] {
                assert_eq!(resource_of(&key).as_deref(), Some(name), "{key:?}");
            }
        }
        assert_eq!(resource_of("lock:fence-counter"), None);
        assert_eq!(resource_of("lock:{}:fair"), None);
        assert_eq!(resource_of("lock:{a%4}:fair"), None);
    }
}
