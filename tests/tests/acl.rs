//! The smallest ACL a lock user needs (the README's, word for word): the
//! whole exclusive-lock path runs as that user on one server and on a
//! Cluster, and the fair lock's and the semaphore's with the commands they add; a missing permission is a `LockError` naming the command; two
//! lockers with their own prefixes and users cannot touch each other's locks.

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::fixtures::{
    CONNECT_TIMEOUT, RESPONSE_TIMEOUT, config, exists, hold_renew_and_hand_over,
};
use lock_tests::sentinel::MASTER_NAME;
use lock_tests::{RedisCluster, RedisServer, SentinelSetup};

/// What every lock user needs, with `{prefix}` for its key prefix (the
/// README's "Least privilege" section).
const LOCK_USER: &str = "resetkeys ~{prefix}* resetchannels &{prefix}* nocommands \
     +ping +hello +select +script|load +evalsha +eval \
     +get +set +del +pexpire +pttl +time +append +publish +spublish \
     +subscribe +unsubscribe +ssubscribe +sunsubscribe";
/// What a Cluster adds: slot discovery.
const CLUSTER_EXTRA: &str = "+cluster|slots +cluster|shards +asking +readonly";
/// What each Redlock master adds: the restart quarantine and the counter.
const REDLOCK_EXTRA: &str = "+info +incr";
/// What the fair lock adds: its line of waiters is a sorted set.
const FAIR_EXTRA: &str = "+zadd +zrem +zscore +zrange +zrangebyscore";
/// What a Sentinel's master (and its replica, a master to be) adds: the
/// lookup's check that the server named is a master.
const SENTINEL_EXTRA: &str = "+role";

/// Creates `user` with password `pw` on `server`, allowed `rules`.
fn set_user(server: &RedisServer, user: &str, prefix: &str, rules: &str) {
    let mut args = vec!["ACL", "SETUSER", user, "reset", "on"];
    let password = format!(">{user}-pw");
    args.push(&password);
    let rules = rules.replace("{prefix}", prefix);
    args.extend(rules.split_whitespace());
    assert_eq!(server.cmd(&args), redis::Value::Okay, "{args:?}");
}

fn url_as(user: &str, port: u16) -> String {
    format!("redis://{user}:{user}-pw@127.0.0.1:{port}/")
}

/// The whole lock path (`hold_renew_and_hand_over`) as the `orders` user on a multi-host deployment of
/// `kind` over `servers`.
async fn whole_path_as_orders(kind: &str, servers: &[RedisServer]) {
    let url = lock_tests::fixtures::multi_host_url(kind, servers, "")
        .replace("://", "://orders:orders-pw@");
    let connect = || Locker::connect(config(&url).key_prefix("orders:lock:"));
    let (holder, waiter) = (connect().await.unwrap(), connect().await.unwrap());
    hold_renew_and_hand_over(&holder, waiter, "stock:42").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_runs_the_whole_lock_path_on_one_server() {
    let server = RedisServer::start();
    set_user(&server, "orders", "orders:lock:", LOCK_USER);
    let connect =
        || Locker::connect(config(&url_as("orders", server.port())).key_prefix("orders:lock:"));
    let (holder, waiter) = (connect().await.unwrap(), connect().await.unwrap());
    hold_renew_and_hand_over(&holder, waiter, "stock:42").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_runs_the_whole_lock_path_on_a_cluster() {
    let cluster = RedisCluster::start();
    for node in cluster.nodes() {
        set_user(
            node,
            "orders",
            "orders:lock:",
            &format!("{LOCK_USER} {CLUSTER_EXTRA}"),
        );
    }
    whole_path_as_orders("cluster", cluster.nodes()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_runs_the_whole_lock_path_on_redlock() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    for master in &masters {
        set_user(
            master,
            "orders",
            "orders:lock:",
            &format!("{LOCK_USER} {REDLOCK_EXTRA}"),
        );
    }
    whole_path_as_orders("redlock", &masters).await;
}

/// A Sentinel setup whose master and replica have the documented lock
/// user, `orders`, with the commands Sentinel needs besides.
fn sentinel_with_the_lock_user() -> SentinelSetup {
    let setup = tokio::task::block_in_place(SentinelSetup::start);
    for server in [&setup.master, &setup.replica] {
        set_user(
            server,
            "orders",
            "orders:lock:",
            &format!("{LOCK_USER} {SENTINEL_EXTRA}"),
        );
    }
    setup
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_runs_the_whole_lock_path_through_sentinel() {
    let setup = sentinel_with_the_lock_user();
    // The credentials are the master's; the sentinels are asked without.
    let url = setup.url().replace("://", "://orders:orders-pw@");
    let connect = || Locker::connect(config(&url).key_prefix("orders:lock:"));
    let (holder, waiter) = (connect().await.unwrap(), connect().await.unwrap());
    hold_renew_and_hand_over(&holder, waiter, "stock:42").await;
}

/// Connects as `user` (with the documented password) to `server` under
/// `prefix`: the error, which the test expects.
async fn refused_at_connect(server: &RedisServer, user: &str, prefix: &str) -> LockError {
    let url = url_as(user, server.port());
    match Locker::connect(config(&url).key_prefix(prefix)).await {
        Ok(_) => panic!("{user} connected without a permission the locks need"),
        Err(err) => err,
    }
}

/// A user that could take a free lock with plain commands but not give it
/// back (no script), or that lacks a command a script or the listener
/// needs, is refused at connect, with the command named, before it takes
/// a lock it cannot release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_permission_is_refused_at_connect_by_name() {
    let server = RedisServer::start();
    for (user, missing, named) in [
        ("noevalsha", "+evalsha", "evalsha"),
        ("noeval", "+eval", "eval"),
        ("notime", "+time", "time"),
        ("noappend", "+append", "append"),
        ("nopexpire", "+pexpire", "pexpire"),
        ("nosubscribe", "+subscribe", "subscribe"),
        ("nopublish", "+publish", "publish"),
    ] {
        let rules = LOCK_USER.replace(&format!("{missing} "), " ");
        assert_ne!(rules, LOCK_USER, "{missing} is in the documented ACL");
        set_user(&server, user, "orders:lock:", &rules);
        let err = refused_at_connect(&server, user, "orders:lock:").await;
        let text = err.to_string();
        assert!(matches!(err, LockError::Config(_)), "{user}: {err:?}");
        assert!(
            text.contains(&format!("may not run {named}"))
                || text.contains(&format!("'{named}' command")),
            "{user}: {text}"
        );
        assert!(text.contains("Least privilege"), "{user}: {text}");
    }
    // Nothing was taken on the way.
    assert_eq!(lock_tests::fixtures::key_count(&server), 0);
}

/// On Redlock each master's user needs the counter's `INCR` and the
/// quarantine's `INFO` too: a master without them is refused at connect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_master_without_incr_is_refused_at_connect() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    for (n, master) in masters.iter().enumerate() {
        let extra = if n == 1 { "+info" } else { REDLOCK_EXTRA };
        set_user(
            master,
            "orders",
            "orders:lock:",
            &format!("{LOCK_USER} {extra}"),
        );
    }
    let url = lock_tests::fixtures::multi_host_url("redlock", &masters, "")
        .replace("://", "://orders:orders-pw@");
    let Err(err) = Locker::connect(config(&url).key_prefix("orders:lock:")).await else {
        panic!("a master's user without +incr connected");
    };
    assert!(matches!(err, LockError::Config(_)), "{err:?}");
    assert!(err.to_string().contains("may not run incr"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_services_cannot_touch_each_others_locks() {
    let server = RedisServer::start();
    set_user(&server, "orders", "orders:lock:", LOCK_USER);
    set_user(&server, "billing", "billing:lock:", LOCK_USER);
    let orders =
        Locker::connect(config(&url_as("orders", server.port())).key_prefix("orders:lock:"))
            .await
            .unwrap();
    let held = orders.lock("ledger").acquire().await.unwrap();
    // Billing's user pretending to be orders (its prefix) is refused at
    // connect, on the keys themselves, and the lock of orders stays as it
    // was.
    let err = refused_at_connect(&server, "billing", "orders:lock:").await;
    assert!(matches!(err, LockError::Config(_)), "{err:?}");
    assert!(
        err.to_string().contains("No permissions to access a key")
            || err
                .to_string()
                .contains("no permissions to access one of the keys"),
        "{err}"
    );
    assert!(held.is_held() && exists(&server, "orders:lock:{ledger}"));
    // Under its own prefix, billing locks a name of the same text freely.
    let billing =
        Locker::connect(config(&url_as("billing", server.port())).key_prefix("billing:lock:"))
            .await
            .unwrap();
    let own = billing.lock("ledger").try_acquire().await.unwrap();
    assert!(own.is_some());
    assert!(held.release().await.unwrap());
}

/// A user of the documented ACL locks on the database a URL names (`/2`):
/// connecting to it sends `SELECT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_locks_on_a_database_named_in_the_url() {
    let server = RedisServer::start();
    set_user(&server, "orders", "orders:lock:", LOCK_USER);
    let url = format!("redis://orders:orders-pw@127.0.0.1:{}/2", server.port());
    let locker = Locker::connect(config(&url).key_prefix("orders:lock:"))
        .await
        .unwrap_or_else(|err| panic!("connect as the documented user on db 2: {err}"));
    let guard = locker.lock("stock:42").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
}

/// Sentinels that require a password (`requirepass`, or a default user
/// with one) in front of a master that requires the lock user: the URL
/// carries the master's credentials in `user:pass@` and the sentinels' in
/// `sentinel_password=`, and the locker reaches the master as the
/// least-privilege user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_with_a_password_in_front_of_an_acl_master() {
    let setup = sentinel_with_the_lock_user();
    for sentinel in setup.sentinels() {
        assert_eq!(
            sentinel.cmd(&[
                "ACL",
                "SETUSER",
                "default",
                "on",
                "resetpass",
                ">sentinel-pw"
            ]),
            redis::Value::Okay
        );
    }
    let url = setup.url().replace("://", "://orders:orders-pw@");
    // Without the sentinels' password, no sentinel answers.
    let Err(err) = Locker::connect(config(&url).key_prefix("orders:lock:")).await else {
        panic!("the sentinels require a password");
    };
    assert!(err.to_string().contains("asking the sentinel at"), "{err}");
    let url = format!("{url}?sentinel_password=sentinel-pw");
    let locker = Locker::connect(config(&url).key_prefix("orders:lock:"))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let guard = locker.lock("who").acquire().await.unwrap();
    assert!(clients_as(&setup.master, "orders") > 0);
    assert!(guard.release().await.unwrap());
}

/// Connections `server` has open as ACL user `user`.
fn clients_as(server: &RedisServer, user: &str) -> usize {
    let clients = match server.cmd(&["CLIENT", "LIST"]) {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("CLIENT LIST: {other:?}"),
    };
    let as_user = format!(" user={user} ");
    clients
        .lines()
        .filter(|line| line.contains(&as_user))
        .count()
}

/// The same without a URL: `LockConfig::sentinel` with the sentinels'
/// password in their URLs, and the master's login set apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_logs_in_to_a_sentinel_master_as_its_user() {
    let setup = sentinel_with_the_lock_user();
    let mut sentinels = Vec::new();
    for sentinel in setup.sentinels() {
        let reply = sentinel.cmd(&["ACL", "SETUSER", "default", "on", "resetpass", ">s-pw"]);
        assert_eq!(reply, redis::Value::Okay);
        sentinels.push(format!("redis://:s-pw@127.0.0.1:{}", sentinel.port()));
    }
    let config = LockConfig::sentinel(&sentinels, MASTER_NAME)
        .unwrap()
        .sentinel_master_auth(Some("orders"), "orders-pw")
        .key_prefix("orders:lock:")
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT);
    assert_eq!(clients_as(&setup.master, "orders"), 0);
    let locker = Locker::connect(config)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let guard = locker.lock("who").acquire().await.unwrap();
    assert!(exists(&setup.master, "orders:lock:{who}"));
    assert!(clients_as(&setup.master, "orders") > 0);
    assert!(guard.release().await.unwrap());
}

/// The fair lock's whole path as `holder` and `waiter`: a hold renewed,
/// a waiter whose place is renewed, the hand-over inside the release.
async fn fair_hold_renew_and_hand_over(holder: &Locker, waiter: Locker) {
    let ttl = lock_tests::fixtures::STALL_PROOF_TTL;
    let guard = holder
        .fair_lock("stock:42")
        .ttl(ttl)
        .acquire()
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        let request = waiter.fair_lock("stock:42").ttl(ttl);
        let taken = request
            .wait(std::time::Duration::from_secs(60))
            .acquire()
            .await;
        let taken = taken.unwrap();
        let fence = taken.fence();
        assert!(taken.release().await.unwrap());
        fence
    });
    tokio::time::sleep(ttl * 2).await;
    assert!(guard.is_held());
    assert!(holder.stats().renewed >= 2, "{:?}", holder.stats());
    let fence = guard.fence();
    assert!(guard.release().await.unwrap());
    assert!(waiting.await.unwrap() > fence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_with_the_fair_locks_commands_runs_its_whole_path() {
    let server = RedisServer::start();
    set_user(
        &server,
        "orders",
        "orders:lock:",
        &format!("{LOCK_USER} {FAIR_EXTRA}"),
    );
    let connect =
        || Locker::connect(config(&url_as("orders", server.port())).key_prefix("orders:lock:"));
    let (holder, waiter) = (connect().await.unwrap(), connect().await.unwrap());
    fair_hold_renew_and_hand_over(&holder, waiter).await;
    let cluster = RedisCluster::start();
    for node in cluster.nodes() {
        let rules = format!("{LOCK_USER} {CLUSTER_EXTRA} {FAIR_EXTRA}");
        set_user(node, "orders", "orders:lock:", &rules);
    }
    let url = lock_tests::fixtures::multi_host_url("cluster", cluster.nodes(), "")
        .replace("://", "://orders:orders-pw@");
    let connect = || Locker::connect(config(&url).key_prefix("orders:lock:"));
    let (holder, waiter) = (connect().await.unwrap(), connect().await.unwrap());
    fair_hold_renew_and_hand_over(&holder, waiter).await;
}

/// Without them, a fair lock is refused with what to grant, and nothing
/// is taken; the other locks go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_without_its_commands_is_refused_by_name() {
    let server = RedisServer::start();
    set_user(&server, "orders", "orders:lock:", LOCK_USER);
    let url = url_as("orders", server.port());
    let locker = Locker::connect(config(&url).key_prefix("orders:lock:"))
        .await
        .unwrap();
    let err = locker.fair_lock("stock:42").acquire().await.unwrap_err();
    let LockError::Config(text) = &err else {
        panic!("{err:?}");
    };
    assert!(text.contains(&format!("grant it `{FAIR_EXTRA}`")), "{text}");
    assert!(!exists(&server, "orders:lock:{stock:42}:fair"));
    let plain = locker.lock("stock:42").acquire().await.unwrap();
    assert!(plain.release().await.unwrap());
}

/// What the semaphore adds: it is a sorted set, reaped by score.
const SEMAPHORE_EXTRA: &str =
    "+zadd +zrem +zscore +zrange +zrangebyscore +zremrangebyscore +zcount";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_with_the_semaphores_commands_runs_its_whole_path() {
    let server = RedisServer::start();
    let rules = format!("{LOCK_USER} {SEMAPHORE_EXTRA}");
    set_user(&server, "orders", "orders:lock:", &rules);
    let url = url_as("orders", server.port());
    let connect = || Locker::connect(config(&url).key_prefix("orders:lock:"));
    let (holder, waiter) = (connect().await.unwrap(), connect().await.unwrap());
    let ttl = lock_tests::fixtures::STALL_PROOF_TTL;
    let held = holder
        .semaphore("renders", 1)
        .ttl(ttl)
        .acquire()
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        let request = waiter.semaphore("renders", 1).ttl(ttl);
        let taken = request
            .wait(std::time::Duration::from_secs(60))
            .acquire()
            .await;
        taken.unwrap().release().await.unwrap()
    });
    // Renewed past its ttl, then given back to the waiter.
    tokio::time::sleep(ttl * 2).await;
    assert!(held.is_held());
    assert!(held.release().await.unwrap());
    assert!(waiting.await.unwrap());
    assert!(!exists(&server, "orders:lock:{renders}:sem"));
}

/// Without them, a semaphore is refused with what to grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_without_its_commands_is_refused_by_name() {
    let server = RedisServer::start();
    set_user(&server, "orders", "orders:lock:", LOCK_USER);
    let url = url_as("orders", server.port());
    let locker = Locker::connect(config(&url).key_prefix("orders:lock:"))
        .await
        .unwrap();
    let err = locker.semaphore("renders", 2).acquire().await.unwrap_err();
    let LockError::Config(text) = &err else {
        panic!("{err:?}");
    };
    assert!(
        text.contains(&format!("grant it `{SEMAPHORE_EXTRA}`")),
        "{text}"
    );
    assert!(!exists(&server, "orders:lock:{renders}:sem"));
}
