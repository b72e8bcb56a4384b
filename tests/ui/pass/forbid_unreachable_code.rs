// A crate that forbids `unreachable_code` can use the attribute: the
// generated code needs no `allow` of that lint, even after a body that
// never ends.
#![forbid(unreachable_code)]

use std::fmt::Display;

use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "stock:<id>")]
async fn deduct(id: u64) -> Result<u64, LockError> {
    if id == 0 {
        return Ok(0);
    }
    Ok(id)
}

#[distributed_lock(key = "leader:<name>")]
async fn lead_forever(name: &str) -> Result<(), LockError> {
    loop {
        tokio::task::yield_now().await;
        let _ = name;
    }
}

#[distributed_lock(key = "draft:<id>")]
async fn not_written_yet(id: u64) -> Result<u64, LockError> {
    let _ = id;
    todo!()
}

#[distributed_lock(key = "shown:<id>")]
async fn impl_in_result(id: u64) -> Result<impl Display, LockError> {
    Ok(id)
}

fn main() {
    let _ = deduct(1);
    let _ = lead_forever("a");
    let _ = not_written_yet(1);
    let _ = impl_in_result(1);
}
