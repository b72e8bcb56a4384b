// `keys = [..]`: several keys taken at once, each rendered like `key`,
// with the options every call takes; a method under `#[async_trait]` too.
use lock_runtime::{LockError, Locker, distributed_lock};

struct Account {
    id: u64,
}

#[distributed_lock(keys = ["acct:<from>", "acct:<to>"], ttl = "3s", wait = "2s")]
async fn transfer(from: u64, to: u64, amount: u64) -> Result<u64, LockError> {
    Ok(amount + from + to)
}

#[distributed_lock(keys = ["acct:<from.id>", "acct:<to.id>", "ledger"], on_lost = "continue", watchdog = false)]
async fn transfer_between(from: &Account, to: &Account) -> Result<u64, LockError> {
    Ok(from.id + to.id)
}

#[distributed_lock(keys = ["cart:<a>"], locker = locker, max_hold = "1m")]
async fn one_key_in_a_list(locker: &Locker, a: String) -> Result<String, LockError> {
    Ok(a)
}

#[async_trait::async_trait]
trait Ledger {
    async fn merge(&self, a: u64, b: u64) -> Result<u64, LockError>;
}

struct Carts {
    locker: Locker,
}

#[async_trait::async_trait]
impl Ledger for Carts {
    #[distributed_lock(keys = ["cart:<a>", "cart:<b>"], locker = self.locker)]
    async fn merge(&self, a: u64, b: u64) -> Result<u64, LockError> {
        Ok(a + b)
    }
}

fn send<T: Send>(_: T) {}

fn main() {
    send(transfer(1, 2, 3));
    let (from, to) = (Account { id: 1 }, Account { id: 2 });
    send(transfer_between(&from, &to));
    let _ = one_key_in_a_list;
    let _ = <Carts as Ledger>::merge;
}
