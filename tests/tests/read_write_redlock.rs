//! The read/write lock on Redlock, with masters cut off: a read and a
//! write each need a majority of three masters, and any two majorities
//! share a master, whose script refuses the later one. A reader that
//! reaches A and B keeps out a writer that reaches B and C, and the other
//! way round. The behaviours on Redlock with every master up run in
//! `read_write.rs`.

use std::time::Duration;

use lock_runtime::{LockConfig, Locker};
use lock_tests::fixtures::{STALL_PROOF_TTL, settled_masters};
use lock_tests::{FaultProxy, RedisServer};

const TTL: Duration = STALL_PROOF_TTL;

/// A locker that reaches every master but `cut`, which it reaches
/// through `proxy`.
async fn locker_without(masters: &[RedisServer], cut: usize, proxy: &FaultProxy) -> Locker {
    let hosts: Vec<String> = masters
        .iter()
        .enumerate()
        .map(|(index, master)| {
            let port = if index == cut {
                proxy.port()
            } else {
                master.port()
            };
            format!("127.0.0.1:{port}")
        })
        .collect();
    let url = format!("redis+redlock://{}", hosts.join(","));
    let config = LockConfig::from_url(&url)
        .unwrap()
        .connect_timeout(Duration::from_millis(500));
    Locker::connect(config).await.unwrap()
}

/// Masters A, B and C; a locker that reaches A and B (C cut) and one that
/// reaches B and C (A cut).
async fn split() -> (Vec<RedisServer>, [FaultProxy; 2], Locker, Locker) {
    let masters = settled_masters(3);
    let proxies = [
        FaultProxy::start(masters[2].port()),
        FaultProxy::start(masters[0].port()),
    ];
    for proxy in &proxies {
        proxy.blackhole(true);
    }
    let ab = locker_without(&masters, 2, &proxies[0]).await;
    let bc = locker_without(&masters, 0, &proxies[1]).await;
    (masters, proxies, ab, bc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_on_ab_keeps_a_writer_on_bc_out() {
    let (_masters, _proxies, ab, bc) = split().await;
    let read = ab.read_lock("doc").ttl(TTL).try_acquire().await.unwrap();
    let read = read.expect("A and B grant the read");
    let write = bc.write_lock("doc").ttl(TTL).try_acquire().await;
    assert!(
        !matches!(write, Ok(Some(_))),
        "a write granted beside a read: {write:?}"
    );
    assert!(read.is_held());
    assert!(read.release().await.unwrap());
    let write = bc.write_lock("doc").ttl(TTL).try_acquire().await.unwrap();
    let write = write.expect("B and C grant the write once the read is gone");
    assert!(write.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_on_bc_keeps_a_reader_on_ab_and_a_writer_on_ab_out() {
    let (_masters, _proxies, ab, bc) = split().await;
    let write = bc.write_lock("doc").ttl(TTL).try_acquire().await.unwrap();
    let write = write.expect("B and C grant the write");
    let read = ab.read_lock("doc").ttl(TTL).try_acquire().await;
    assert!(
        !matches!(read, Ok(Some(_))),
        "a read granted beside a write: {read:?}"
    );
    let other = ab.write_lock("doc").ttl(TTL).try_acquire().await;
    assert!(
        !matches!(other, Ok(Some(_))),
        "two writes granted at once: {other:?}"
    );
    let fence = write.fence();
    assert!(write.release().await.unwrap());
    let read = ab.read_lock("doc").ttl(TTL).try_acquire().await.unwrap();
    let read = read.expect("A and B grant the read once the write is gone");
    assert!(
        read.fence() > fence,
        "the read fences above the write before it"
    );
    assert!(read.release().await.unwrap());
}
