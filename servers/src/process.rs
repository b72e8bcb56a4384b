//! Raw libc calls behind safe functions, so that `unsafe` stays in this
//! module rather than spread over the helpers that need them.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Arranges for the child to receive `SIGKILL` when the thread that
/// spawns it exits, so servers never outlive a crashed test binary.
pub fn kill_with_parent(command: &mut Command) {
    let parent = libc::pid_t::try_from(std::process::id()).expect("pid fits in pid_t");
    let hook = move || {
        // Runs in the forked child before exec: only async-signal-safe
        // syscalls, no allocation (hence from_raw_os_error below).
        //
        // The signal is passed as c_ulong because prctl is variadic and
        // the kernel reads a full unsigned long.
        //
        // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag on the calling
        // process and has no memory-safety preconditions.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } == -1 {
            return Err(io::Error::last_os_error());
        }
        // If the parent already died between fork and prctl, the death
        // signal will never come: refuse to exec an orphan server.
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the hook only performs async-signal-safe syscalls and does
    // not allocate or touch locks, as pre_exec requires.
    unsafe {
        command.pre_exec(hook);
    }
}

/// Sends `signal` to `pid`.
pub fn send_signal(pid: u32, signal: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
