//! Runs the example programs as a user would, against a private
//! redis-server (through `REDIS_URL`), a throwaway one of their own, or no
//! server at all, and checks what they print.

use std::process::{Command, Output};

use lock_tests::RedisServer;

fn run(exe: &str, args: &[&str], server: &RedisServer) -> Output {
    Command::new(exe)
        .args(args)
        .env("REDIS_URL", server.url())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {exe}: {e}"))
}

fn last_line(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().last().unwrap_or("").to_owned()
}

fn explain(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn stock_with_the_lock_sells_exactly_the_stock() {
    let server = RedisServer::start();
    let args = ["--stock", "50", "--buyers", "100", "--timeout", "60"];
    let output = run(env!("CARGO_BIN_EXE_stock"), &args, &server);
    assert!(output.status.success(), "{}", explain(&output));
    assert_eq!(
        last_line(&output),
        "result: mode=lock sold=50 remaining=0 oversold=0",
        "{}",
        explain(&output)
    );
}

#[test]
fn stock_without_the_lock_reports_a_result() {
    let server = RedisServer::start();
    let args = ["--mode", "none", "--stock", "50", "--buyers", "100"];
    let output = run(env!("CARGO_BIN_EXE_stock"), &args, &server);
    assert!(output.status.success(), "{}", explain(&output));
    // How much it oversells depends on timing; that it reports does not.
    assert!(
        last_line(&output).starts_with("result: mode=none sold="),
        "{}",
        explain(&output)
    );
}

#[test]
fn stock_rejects_a_bad_flag() {
    // Rejected before any connection is made: no server needed.
    let output = Command::new(env!("CARGO_BIN_EXE_stock"))
        .args(["--stok", "5"])
        .output()
        .expect("run stock");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unexpected argument '--stok'") && stderr.contains("'--stock'"),
        "{}",
        explain(&output)
    );
}

#[test]
fn catalog_readers_share_and_never_see_a_write_half_done() {
    let server = RedisServer::start();
    let output = run(env!("CARGO_BIN_EXE_catalog"), &[], &server);
    assert!(output.status.success(), "{}", explain(&output));
    let last = last_line(&output);
    assert!(
        last.starts_with("result: reads=") && last.ends_with("torn_reads=0"),
        "{}",
        explain(&output)
    );
}

const EXAMPLES: [&str; 5] = [
    env!("CARGO_BIN_EXE_stock"),
    env!("CARGO_BIN_EXE_catalog"),
    env!("CARGO_BIN_EXE_http_service"),
    env!("CARGO_BIN_EXE_http_load"),
    env!("CARGO_BIN_EXE_watchdog"),
];

#[test]
fn every_example_explains_itself_with_help() {
    for exe in EXAMPLES {
        let output = Command::new(exe)
            .arg("--help")
            .env_remove("REDIS_URL")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {exe}: {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{exe}: {}", explain(&output));
        assert!(
            stdout.contains("Usage:") && stdout.contains("REDIS_URL"),
            "{exe}: {stdout}"
        );
    }
}

/// A machine with Rust only: no `REDIS_URL`, no `redis-server` on `PATH`.
/// The examples run on the in-memory store, say so first, and keep their
/// promises (the watchdog demo checks itself through its exit code).
#[test]
fn with_no_server_the_examples_run_in_memory() {
    let bare = |exe: &str, args: &[&str]| {
        Command::new(exe)
            .args(args)
            .env_remove("REDIS_URL")
            .env("PATH", "")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {exe}: {e}"))
    };
    let first_line = |output: &Output| {
        let stdout = String::from_utf8_lossy(&output.stdout);
        stdout.lines().next().unwrap_or("").to_owned()
    };
    let stock = bare(
        env!("CARGO_BIN_EXE_stock"),
        &["--stock", "30", "--buyers", "60"],
    );
    assert!(stock.status.success(), "{}", explain(&stock));
    assert!(
        first_line(&stock).contains("using the in-memory store"),
        "{}",
        explain(&stock)
    );
    assert_eq!(
        last_line(&stock),
        "result: mode=lock sold=30 remaining=0 oversold=0",
        "{}",
        explain(&stock)
    );
    let watchdog = bare(env!("CARGO_BIN_EXE_watchdog"), &[]);
    assert!(watchdog.status.success(), "{}", explain(&watchdog));
    assert!(
        first_line(&watchdog).contains("using the in-memory store"),
        "{}",
        explain(&watchdog)
    );
    let load = bare(
        env!("CARGO_BIN_EXE_http_load"),
        &["--stock", "20", "--requests", "60"],
    );
    assert!(load.status.success(), "{}", explain(&load));
    assert!(
        last_line(&load).ends_with(" oversold=0"),
        "{}",
        explain(&load)
    );
}

/// Without `REDIS_URL`, an installed `redis-server` is started for the run
/// and stopped after it; no server the user did not name is touched.
#[test]
fn without_redis_url_the_stock_example_starts_its_own_server() {
    let output = Command::new(env!("CARGO_BIN_EXE_stock"))
        .args(["--stock", "20", "--buyers", "40"])
        .env_remove("REDIS_URL")
        .output()
        .expect("run stock");
    assert!(output.status.success(), "{}", explain(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .lines()
            .next()
            .is_some_and(|line| line.starts_with("redis: a throwaway redis-server on 127.0.0.1:")),
        "{}",
        explain(&output)
    );
    assert_eq!(
        last_line(&output),
        "result: mode=lock sold=20 remaining=0 oversold=0",
        "{}",
        explain(&output)
    );
}

#[test]
fn watchdog_renews_then_reports_the_loss() {
    let server = RedisServer::start();
    let output = run(env!("CARGO_BIN_EXE_watchdog"), &[], &server);
    assert!(output.status.success(), "{}", explain(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("run 1: finished all 5 steps"), "{stdout}");
    assert!(stdout.contains("run 2: Err(LockError::Lost)"), "{stdout}");
}

#[test]
fn http_load_balances_its_books() {
    let server = RedisServer::start();
    let args = ["--stock", "20", "--requests", "60"];
    let output = run(env!("CARGO_BIN_EXE_http_load"), &args, &server);
    assert!(output.status.success(), "{}", explain(&output));
    let last = last_line(&output);
    assert!(last.starts_with("result: sold="), "{}", explain(&output));
    assert!(last.ends_with(" oversold=0"), "{}", explain(&output));
}

/// A failing run prints where it failed, never the password of the URL it
/// was given (users copy the examples' error handling).
#[test]
fn a_failing_run_never_prints_the_password() {
    let port = lock_tests::closed_port();
    let url = format!("redis://:s3cret-pw@127.0.0.1:{port}/");
    for exe in [
        env!("CARGO_BIN_EXE_stock"),
        env!("CARGO_BIN_EXE_http_service"),
        env!("CARGO_BIN_EXE_watchdog"),
    ] {
        let output = Command::new(exe)
            .env("REDIS_URL", &url)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {exe}: {e}"));
        assert!(
            !output.status.success(),
            "{exe} ran without a server: {}",
            explain(&output)
        );
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !printed.contains("s3cret-pw"),
            "{exe} printed the password:\n{printed}"
        );
        assert!(
            printed.contains(&format!("127.0.0.1:{port}")),
            "{exe} did not say where:\n{printed}"
        );
    }
}
