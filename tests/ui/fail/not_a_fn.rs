use lock_runtime::distributed_lock;

#[distributed_lock(key = "stock")]
struct Stock {
    count: u32,
}

fn main() {
    let stock = Stock { count: 1 };
    let _ = stock.count;
}
