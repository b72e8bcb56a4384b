use lock_runtime::distributed_lock;

#[derive(Debug)]
struct AppError;

#[distributed_lock(key = "stock:<id>")]
async fn deduct(id: u64) -> Result<u64, AppError> {
    Ok(id)
}

fn main() {}
