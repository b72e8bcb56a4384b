use lock_runtime::{LockError, distributed_lock};

#[distributed_lock(key = "render:<tenant>", limit = 4)]
async fn render(tenant: &str) -> Result<usize, LockError> {
    Ok(tenant.len())
}

#[distributed_lock(key = "render:<tenant>", limit = 4, permits = 2, ttl = "3s", wait = "1s")]
async fn render_large(tenant: &str) -> Result<usize, LockError> {
    Ok(tenant.len() * 2)
}

fn main() {
    let _ = render("acme");
    let _ = render_large("acme");
}
