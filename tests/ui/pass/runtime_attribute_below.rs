// With `#[tokio::main]` or `#[tokio::test]` below it, the attribute sees
// the `async fn` and the runtime runs the locked body.
use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "nightly:<day>")]
#[tokio::main(flavor = "current_thread")]
async fn nightly(day: u32) -> Result<u32, LockError> {
    Ok(day)
}

fn main() {
    let _ = nightly;
}
