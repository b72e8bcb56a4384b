use lock_runtime::distributed_lock;

#[distributed_lock(key = "stock:<id>")]
async fn returns_option(id: u64) -> Option<u64> {
    Some(id)
}

#[distributed_lock(key = "stock:<id>")]
async fn returns_nothing(id: u64) {
    let _ = id;
}

fn main() {}
