use lock_runtime::{LockError, distributed_lock};

// `#[tokio::main]` (like `#[tokio::test]`) expands first and leaves a plain
// `fn` that builds a runtime: the error is at the attribute to move.
#[tokio::main(flavor = "current_thread")]
#[distributed_lock(key = "nightly:<day>")]
async fn nightly(day: u32) -> Result<u32, LockError> {
    Ok(day)
}

fn main() {}
