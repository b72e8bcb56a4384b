use lock_runtime::{LockError, distributed_lock};

/// Docs and attributes stay on the function.
#[distributed_lock(key = "stock:<id>", ttl = "3s", wait = "2s")]
#[allow(clippy::unused_async)]
pub(crate) async fn deduct(id: u64, qty: u32) -> Result<u32, LockError> {
    Ok(qty)
}

#[distributed_lock(key = "report:daily")]
async fn no_placeholders() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "a<<b>>:<id>")]
async fn literal_angle_brackets(id: u32) -> Result<(), LockError> {
    let _ = id;
    Ok(())
}

#[distributed_lock(key = "early:<id>")]
async fn early_return_and_question_mark(id: u32) -> Result<u32, LockError> {
    if id == 0 {
        return Ok(0);
    }
    let parsed: u32 = "7".parse().map_err(|_| LockError::Config("not a number".into()))?;
    Ok(parsed + id)
}

fn main() {
    let _ = deduct(42, 1);
    let _ = no_placeholders();
    let _ = literal_angle_brackets(1);
    let _ = early_return_and_question_mark(1);
}
