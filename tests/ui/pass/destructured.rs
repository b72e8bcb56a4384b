use lock_runtime::{LockError, distributed_lock};

struct Point {
    x: i32,
    y: i32,
}

#[distributed_lock(key = "cell:<x>:<y>")]
async fn cell(Point { x, y }: Point) -> Result<i32, LockError> {
    Ok(x + y)
}

#[distributed_lock(key = "pair:<a>:<b>")]
async fn pair((a, b): (u8, u8), _unused: u8) -> Result<u8, LockError> {
    Ok(a + b)
}

#[distributed_lock(key = "ref:<value>")]
async fn by_reference(&value: &u32, mut counter: u32) -> Result<u32, LockError> {
    counter += value;
    Ok(counter)
}

fn main() {
    let _ = cell(Point { x: 1, y: 2 });
    let _ = pair((1, 2), 3);
    let _ = by_reference(&1, 2);
}
