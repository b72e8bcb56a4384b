use lock_runtime::{LockError, distributed_lock};

#[derive(Debug)]
enum AppError {
    Lock(LockError),
}

impl From<LockError> for AppError {
    fn from(error: LockError) -> Self {
        AppError::Lock(error)
    }
}

type AppResult<T> = Result<T, AppError>;

#[distributed_lock(key = "io:<id>")]
async fn io_result(id: u32) -> std::io::Result<u32> {
    Ok(id)
}

#[distributed_lock(key = "anyhow:<id>")]
async fn anyhow_result(id: u32) -> anyhow::Result<u32> {
    Ok(id)
}

#[distributed_lock(key = "app:<id>")]
async fn app_result(id: u32) -> AppResult<u32> {
    Ok(id)
}

#[distributed_lock(key = "full:<id>")]
async fn full_path(id: u32) -> ::std::result::Result<u32, AppError> {
    Ok(id)
}

fn main() {
    let _ = io_result(1);
    let _ = anyhow_result(1);
    let _ = app_result(1);
    let _ = full_path(1);
}
