use std::fmt::Display;

use lock_runtime::{LockError, distributed_lock};

type Fallible<T> = Result<T, LockError>;

#[distributed_lock(key = "fallible:<id>")]
async fn named_alias(id: u32) -> Fallible<u32> {
    Ok(id)
}

#[distributed_lock(key = "kind:<type>:<r#match.0>")]
async fn keyword_parameters(r#type: &str, r#match: (u8, u8)) -> Result<usize, LockError> {
    Ok(r#type.len() + usize::from(r#match.1))
}

#[distributed_lock(key = "shown:<id>")]
async fn impl_in_result(id: u32) -> Result<impl Display, LockError> {
    Ok(id)
}

#[distributed_lock(key = "quiet:<id>")]
async fn inner_attribute(id: u32, unused: u32) -> Result<u32, LockError> {
    #![allow(unused_variables)]
    Ok(id)
}

struct Session {
    id: u64,
}

impl Session {
    #[distributed_lock(key = "session:<id>")]
    async fn open(id: u64) -> Result<Self, LockError> {
        Ok(Self { id })
    }
}

// Functions written by a declarative macro, with the key passed in.
macro_rules! locked_getter {
    ($name:ident, $key:literal) => {
        #[distributed_lock(key = $key, ttl = "2s")]
        async fn $name(id: u64) -> Result<u64, LockError> {
            Ok(id)
        }
    };
}

macro_rules! locked_getter_tt {
    ($name:ident, $key:tt) => {
        #[distributed_lock(key = $key)]
        async fn $name(id: u64) -> Result<u64, LockError> {
            Ok(id)
        }
    };
}

locked_getter!(by_literal, "getter:<id>");
locked_getter_tt!(by_token_tree, "getter:<id>");

fn main() {
    let _ = named_alias(1);
    let _ = keyword_parameters("x", (1, 2));
    let _ = impl_in_result(1);
    let _ = inner_attribute(1, 2);
    let _ = Session::open(1);
    let _ = by_literal(1);
    let _ = by_token_tree(1);
}
