use lock_runtime::{LockError, distributed_lock};

#[derive(Debug)]
struct AppError;

impl From<LockError> for AppError {
    fn from(_: LockError) -> Self {
        AppError
    }
}

// The mistake is reported at the `return`, as it would be without the
// attribute, not at the attribute.
#[distributed_lock(key = "stock:<id>")]
async fn deduct(id: u64) -> Result<u64, AppError> {
    if id == 0 {
        return Err(format!("no stock for {id}"));
    }
    Ok(id)
}

fn main() {}
