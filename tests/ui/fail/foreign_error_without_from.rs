use lock_runtime::distributed_lock;

// axum's usual handler error, `(StatusCode, String)`: a tuple of another
// crate's types, which cannot get `From<LockError>` in this crate.
#[distributed_lock(key = "stock:<id>")]
async fn deduct(id: u64) -> Result<u64, (u16, String)> {
    Ok(id)
}

// Through an alias the error type has no place of its own in the
// signature: the message is at the whole return type.
type Handled<T> = Result<T, (u16, String)>;

#[distributed_lock(key = "stock:<id>")]
async fn deduct_aliased(id: u64) -> Handled<u64> {
    Ok(id)
}

fn main() {}
