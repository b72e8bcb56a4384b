use std::fmt::Display;

use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "item:<id>")]
async fn generic<'a, T, E>(id: T, label: &'a str) -> Result<&'a str, E>
where
    T: Display + Send,
    E: From<LockError>,
{
    let _ = id;
    Ok(label)
}

#[distributed_lock(key = "item:<id>")]
async fn impl_trait_argument(id: impl Display + Send) -> Result<String, LockError> {
    Ok(id.to_string())
}

fn main() {
    let _ = generic::<u32, LockError>(1, "x");
    let _ = impl_trait_argument("x");
}
