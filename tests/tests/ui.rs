//! Compile-time behaviour of `#[distributed_lock]`: every accepted shape
//! builds, every mistake is a spanned error whose text is checked in.
//! Regenerate the snapshots after a deliberate change with
//! `TRYBUILD=overwrite cargo test -p lock-tests --test ui`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
