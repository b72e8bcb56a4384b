use lock_runtime::{LockError, Locker, distributed_lock};

fn assert_send<T: Send>(_: T) {}

#[distributed_lock(key = "stock:<id>")]
async fn deduct(id: u64) -> Result<u64, LockError> {
    tokio::task::yield_now().await;
    Ok(id)
}

struct Service {
    locker: Locker,
}

impl Service {
    #[distributed_lock(key = "svc:<id>", locker = self.locker)]
    async fn handle(&self, id: u64) -> Result<u64, LockError> {
        tokio::task::yield_now().await;
        Ok(id)
    }
}

fn spawnable(service: &'static Service) {
    assert_send(deduct(1));
    assert_send(service.handle(1));
    // What tokio::spawn requires: Send + 'static.
    drop(tokio::spawn(deduct(2)));
}

fn main() {
    let _ = spawnable;
}
