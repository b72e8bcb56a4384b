use lock_runtime::distributed_lock;

#[distributed_lock(key = "stock:<sku>", ttl = "soon", on_lost = "panic", retries = 3)]
fn deduct(id: u64) -> u64 {
    id
}

fn main() {}
