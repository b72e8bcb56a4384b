//! Runs the example programs as a user would, against a private
//! redis-server (through `REDIS_URL`), and checks what they print.

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
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("unknown argument `--stok`"),
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
