//! TLS against real `redis-server`s with certificates a private CA made at
//! run time: the lock works over TLS (one server, mutual TLS, Redlock), and
//! every way TLS can fail is a clear `LockError` within the connect bound.

use std::time::{Duration, Instant};

use lock_runtime::{LockConfig, LockError, Locker};
use lock_tests::SentinelSetup;
use lock_tests::fixtures::{
    STALL_PROOF_TTL, STALL_ROOM, exists, hold_renew_and_hand_over, lock_key,
};
use lock_tests::tls::{ClientAuth, TestPki, TlsCluster, TlsServer};

/// The connect timeout of these tests' lockers: a handshake, accepted or
/// refused, takes a starved machine far longer than the usual test
/// timeout (a debug build's rustls on a busy core); what is checked is its
/// outcome.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(10);

/// The test configuration for `url`, with room for the handshake.
fn config(url: &str) -> LockConfig {
    lock_tests::fixtures::config(url).connect_timeout(HANDSHAKE_WITHIN)
}

/// A test locker for `url` that trusts the test CA.
fn trusting(url: &str, pki: &TestPki) -> LockConfig {
    config(url).tls_root_ca(pki.pem("ca.crt"))
}

/// Connecting with `config` fails within the connect bound with a
/// `LockError::Redis`, whose text is returned.
async fn refused(config: LockConfig) -> String {
    let config = config.connect_timeout(HANDSHAKE_WITHIN);
    let started = Instant::now();
    let bound = HANDSHAKE_WITHIN * 2 + STALL_ROOM;
    let outcome = tokio::time::timeout(bound, Locker::connect(config))
        .await
        .unwrap_or_else(|_| panic!("no answer within {bound:?}"));
    let Err(err) = outcome else {
        panic!("the connection must fail");
    };
    assert!(matches!(err, LockError::Redis(_)), "{err:?}");
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());
    err.to_string()
}

/// `first` holds `name` (`while_held` then checks the servers); `second`
/// is refused until it is released, then gets it with a higher fence.
async fn one_owner_at_a_time(first: &Locker, second: &Locker, name: &str, while_held: impl Fn()) {
    let guard = first.lock(name).acquire().await.unwrap();
    while_held();
    assert!(second.lock(name).try_acquire().await.unwrap().is_none());
    let fence = guard.fence();
    assert!(guard.release().await.unwrap());
    let next = second.lock(name).try_acquire().await.unwrap().unwrap();
    assert!(next.fence() > fence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_over_tls_locks_wakes_renews_and_releases() {
    let pki = TestPki::generate();
    let tls = TlsServer::start(&pki, "server", ClientAuth::None);
    let holder = Locker::connect(trusting(&tls.url(), &pki)).await.unwrap();
    let waiter = Locker::connect(trusting(&tls.url(), &pki)).await.unwrap();
    hold_renew_and_hand_over(&holder, waiter, "tls:stock").await;
    told_of_a_delete(&holder, |key| {
        tls.server.cmd(&["DEL", key]);
    })
    .await;
}

/// A lock deleted behind the holder's back is reported lost (found by a
/// renewal over TLS) within a third of the lease and the stall room.
async fn told_of_a_delete(holder: &Locker, delete: impl FnOnce(&str)) {
    let guard = holder
        .lock("tls:deleted")
        .ttl(STALL_PROOF_TTL)
        .acquire()
        .await
        .unwrap();
    delete(&lock_key("tls:deleted"));
    let bound = STALL_PROOF_TTL / 3 + STALL_ROOM;
    tokio::time::timeout(bound, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("the loss was not told within {bound:?}"));
    assert!(!guard.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_the_client_certificate() {
    let pki = TestPki::generate();
    let tls = TlsServer::start(&pki, "server", ClientAuth::Required);
    let without = refused(trusting(&tls.url(), &pki)).await;
    println!("no client certificate: {without}");
    assert!(without.contains(&tls.tls_port().to_string()), "{without}");
    let with =
        trusting(&tls.url(), &pki).tls_client_cert(pki.pem("client.crt"), pki.pem("client.key"));
    let locker = Locker::connect(with).await.unwrap();
    let guard = locker.lock("tls:mutual").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_way_tls_can_fail_is_a_clear_error_within_the_connect_bound() {
    let pki = TestPki::generate();
    let tls = TlsServer::start(&pki, "server", ClientAuth::None);
    let wrong_ca = refused(config(&tls.url()).tls_root_ca(pki.pem("other-ca.crt"))).await;
    println!("wrong CA: {wrong_ca}");
    let platform_roots = refused(config(&tls.url())).await;
    println!("platform roots only: {platform_roots}");
    let plain = refused(config(&format!("redis://127.0.0.1:{}/", tls.tls_port()))).await;
    println!("plain text against the TLS port: {plain}");
    let expired = TlsServer::start(&pki, "expired", ClientAuth::None);
    let expired = refused(trusting(&expired.url(), &pki)).await;
    println!("expired certificate: {expired}");
    assert!(wrong_ca.contains("invalid peer certificate"), "{wrong_ca}");
    assert!(
        platform_roots.contains("invalid peer certificate"),
        "{platform_roots}"
    );
    assert!(expired.to_lowercase().contains("expired"), "{expired}");
    for text in [&wrong_ca, &platform_roots, &plain, &expired] {
        assert!(
            !text.contains("PRIVATE KEY") && !text.contains("BEGIN"),
            "{text}"
        );
    }
}

/// `#insecure` gives up checking the server's certificate: it connects to a
/// server no configured root vouches for. The README says what that costs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_skips_the_certificate_check() {
    let pki = TestPki::generate();
    let tls = TlsServer::start(&pki, "server", ClientAuth::None);
    let url = format!("{}#insecure", tls.url());
    let locker = Locker::connect(config(&url)).await.unwrap();
    let guard = locker.lock("tls:insecure").acquire().await.unwrap();
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_over_tls_keeps_one_owner() {
    let pki = TestPki::generate();
    let masters: Vec<TlsServer> = (0..3)
        .map(|_| TlsServer::start(&pki, "server", ClientAuth::None))
        .collect();
    let hosts: Vec<String> = masters
        .iter()
        .map(|master| format!("127.0.0.1:{}", master.tls_port()))
        .collect();
    let url = format!("rediss+redlock://{}", hosts.join(","));
    let first = Locker::connect(trusting(&url, &pki)).await.unwrap();
    let second = Locker::connect(trusting(&url, &pki)).await.unwrap();
    one_owner_at_a_time(&first, &second, "tls:ledger", || {
        for master in &masters {
            assert!(exists(&master.server, &lock_key("tls:ledger")));
        }
    })
    .await;
}

#[test]
fn from_env_reads_the_certificate_files() {
    let pki = TestPki::generate();
    let run = |vars: &[(&str, &std::path::Path)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lock_worker"));
        command
            .arg("config-from-env")
            .env("REDIS_URL", "rediss://127.0.0.1:6390/")
            .env_remove("REDIS_TLS_CA_FILE")
            .env_remove("REDIS_TLS_CERT_FILE")
            .env_remove("REDIS_TLS_KEY_FILE");
        for (name, path) in vars {
            command.env(name, path);
        }
        let output = command.output().unwrap();
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let (ca, cert, key) = (
        pki.path("ca.crt"),
        pki.path("client.crt"),
        pki.path("client.key"),
    );
    let all = run(&[
        ("REDIS_TLS_CA_FILE", &ca),
        ("REDIS_TLS_CERT_FILE", &cert),
        ("REDIS_TLS_KEY_FILE", &key),
    ]);
    assert!(
        all.starts_with("ok ") && all.matches("<set>").count() == 2,
        "{all}"
    );
    assert!(
        !all.contains("BEGIN"),
        "the Debug output shows no certificate: {all}"
    );
    let half = run(&[("REDIS_TLS_CERT_FILE", &cert)]);
    assert!(
        half.starts_with("config error") && half.contains("REDIS_TLS_KEY_FILE"),
        "{half}"
    );
    let missing = run(&[(
        "REDIS_TLS_CA_FILE",
        std::path::Path::new("/nonexistent/ca.pem"),
    )]);
    assert!(
        missing.starts_with("config error") && missing.contains("REDIS_TLS_CA_FILE"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_mutual_tls_locks_on_every_node_and_wakes_waiters() {
    let pki = TestPki::generate();
    let tls = tokio::task::block_in_place(|| TlsCluster::start(&pki, ClientAuth::Required));
    let connect = || {
        let config = trusting(&tls.url(), &pki)
            .tls_client_cert(pki.pem("client.crt"), pki.pem("client.key"));
        Locker::connect(config)
    };
    let holder = connect().await.unwrap();
    let waiter = connect().await.unwrap();
    // Names that land on each of the three nodes.
    let names: Vec<String> = (0..40).map(|n| format!("tls:sku:{n}")).collect();
    let nodes_hit: std::collections::BTreeSet<usize> = names
        .iter()
        .map(|name| tls.cluster.node_for_key(&lock_key(name)))
        .collect();
    assert_eq!(nodes_hit.len(), 3, "the names cover every node");
    for name in &names {
        let guard = holder.lock(name.as_str()).acquire().await.unwrap();
        assert!(
            waiter
                .lock(name.as_str())
                .try_acquire()
                .await
                .unwrap()
                .is_none()
        );
        assert!(guard.release().await.unwrap());
    }
    // A waiter woken by the release message (sharded, over TLS).
    hold_renew_and_hand_over(&holder, waiter, "tls:sku:0").await;
    told_of_a_delete(&holder, |key| {
        let node = tls.cluster.node_for_key(key);
        tls.cluster.nodes()[node].cmd(&["DEL", key]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_over_tls_with_a_private_ca_finds_and_locks_the_master() {
    let pki = TestPki::generate();
    let setup = tokio::task::block_in_place(|| SentinelSetup::start_tls(&pki));
    let holder = Locker::connect(trusting(&setup.tls_url(), &pki))
        .await
        .unwrap();
    let other = Locker::connect(trusting(&setup.tls_url(), &pki))
        .await
        .unwrap();
    one_owner_at_a_time(&holder, &other, "tls:sentinel", || {
        assert!(exists(&setup.master, &lock_key("tls:sentinel")));
    })
    .await;
    // Without the CA the master's certificate is refused, by the lookup
    // itself (the sentinels' too).
    let err = refused(config(&setup.tls_url())).await;
    assert!(err.contains("invalid peer certificate"), "{err}");
}

/// A CA setting that holds no certificate (a wrong file: empty, a key, not
/// PEM at all) is a `LockError::Config` saying what to fix, not an empty
/// trust store that fails every connection with `LockError::Redis("...
/// invalid peer certificate: UnknownIssuer")`, blaming the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_setting_without_a_certificate_is_a_config_error() {
    let pki = TestPki::generate();
    let tls = TlsServer::start(&pki, "server", ClientAuth::None);
    for (what, pem) in [
        ("not PEM", b"/etc/redis/ca.pem".to_vec()),
        ("empty", Vec::new()),
        ("a private key", pki.pem("client.key")),
    ] {
        let config = config(&tls.url()).tls_root_ca(pem);
        let outcome = Locker::connect(config).await;
        assert!(
            matches!(&outcome, Err(LockError::Config(text)) if text.contains("tls_root_ca")),
            "{what}: {:?}",
            outcome.err()
        );
    }
}

/// A wrong CA through Sentinel fails `Locker::connect` with a
/// `LockError::Redis` naming the server it met (a sentinel here) and the
/// cause, as on one server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_through_sentinel_names_the_server() {
    let pki = TestPki::generate();
    let setup = tokio::task::block_in_place(|| SentinelSetup::start_tls(&pki));
    let err = refused(config(&setup.tls_url()).tls_root_ca(pki.pem("other-ca.crt"))).await;
    let url = setup.tls_url();
    let ports: Vec<&str> = url
        .trim_start_matches("rediss+sentinel://")
        .split('/')
        .next()
        .unwrap()
        .split(',')
        .map(|host| host.rsplit(':').next().unwrap())
        .collect();
    assert!(
        ports.iter().any(|port| err.contains(port)) || err.contains("sentinel"),
        "names no server: {err}"
    );
}
