use lock_runtime::distributed_lock;

struct Receipt;

// A type of the user's own is not a `Result` either: the same message, at
// the return type, from the type checker.
#[distributed_lock(key = "stock:<id>")]
async fn deduct(id: u64) -> Receipt {
    let _ = id;
    Receipt
}

type Outcome = Receipt;

#[distributed_lock(key = "stock:<id>")]
async fn deduct_aliased(id: u64) -> Outcome {
    let _ = id;
    Receipt
}

fn main() {}
