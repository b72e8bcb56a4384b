//! Telling a forked child from its parent without a system call.
//!
//! A child made by `fork` starts with a copy of its parent's memory, the
//! secrets fetched ahead for owner tokens included (see `crate::owner`):
//! it must never hand out the ones its parent will. Comparing the process
//! id before each token notices a fork, but `getpid` is a system call
//! (glibc no longer caches it) and it ran on every acquisition, 3-4 % of
//! the client's work on a busy lock path. Instead, a handler registered
//! once with `pthread_atfork` counts forks in the child, and comparing
//! the count is one atomic load.
//!
//! Children started by `posix_spawn` or `vfork` run no handler and need
//! none: they become another program before they could take a lock.
//! Where the handler cannot be registered (or off Unix), the process id
//! stands in for the count.

use std::sync::atomic::{AtomicU64, Ordering};

use once_cell::sync::Lazy;

/// The forks between the first process that registered the handler and
/// this one, counted by the handler in each child.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Whether the handler counts forks; registered at the first call of
/// [`lineage`].
static COUNTED: Lazy<bool> = Lazy::new(register);

/// A number that differs between this process and every child it forks
/// afterwards (and their children): where a value was made, for values
/// that no two processes may share.
pub(crate) fn lineage() -> u64 {
    if *COUNTED {
        FORKS.load(Ordering::Relaxed)
    } else {
        u64::from(std::process::id())
    }
}

/// Runs in the child, on the thread that forked, before `fork` returns:
/// only an atomic add, which is async-signal-safe.
#[cfg(unix)]
extern "C" fn count_in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn register() -> bool {
    // SAFETY: the handler is a plain function that touches one static
    // atomic; registering it has no other effect, and the registration
    // lives as long as the process (handlers cannot be removed).
    let status = unsafe { libc::pthread_atfork(None, None, Some(count_in_child)) };
    status == 0
}

#[cfg(not(unix))]
fn register() -> bool {
    false
}

/// Runs `answer` in a child forked from this process and returns what it
/// answered, for tests of what a child sees. `answer` must not allocate:
/// the test process has other threads, one of which may hold the
/// allocator's lock at the fork.
#[cfg(all(test, unix))]
#[allow(unsafe_code)]
pub(crate) fn in_forked_child<const N: usize>(answer: fn() -> [u8; N]) -> [u8; N] {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child runs `answer`, `write` and `_exit` only.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let answered = answer();
        // SAFETY: writes from a live buffer, then exits without running
        // the parent's destructors or its test harness.
        unsafe {
            libc::write(fds[1], answered.as_ptr().cast(), N);
            libc::_exit(0);
        }
    }
    let mut answered = [0u8; N];
    // SAFETY: reads at most N bytes into a live buffer; waits for the
    // child so that it leaves no zombie.
    let read = unsafe {
        libc::close(fds[1]);
        let read = libc::read(fds[0], answered.as_mut_ptr().cast(), N);
        libc::close(fds[0]);
        libc::waitpid(child, std::ptr::null_mut(), 0);
        read
    };
    assert_eq!(usize::try_from(read).ok(), Some(N), "the child answered");
    answered
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_forked_child_has_a_lineage_of_its_own() {
        let parent = lineage();
        assert!(*COUNTED, "the handler registers on Unix");
        let child = in_forked_child(|| lineage().to_le_bytes());
        assert_ne!(u64::from_le_bytes(child), parent);
        assert_eq!(lineage(), parent, "the parent's own lineage never moves");
    }
}
