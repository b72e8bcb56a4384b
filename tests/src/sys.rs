//! Raw libc calls behind safe functions, so that `unsafe` stays in this
//! module rather than spread over the helpers that need them.

use std::io;
use std::mem;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Binds a TCP socket to a free `127.0.0.1` port *without listening*, and
/// returns it with the port.
///
/// While the socket is open, connecting to the port is refused, and no other
/// socket can bind the port (it lacks `SO_REUSEADDR`, and the kernel's
/// automatic port choice skips ports in use). std cannot express "bound but
/// not listening", hence raw libc.
pub(crate) fn bind_without_listening() -> io::Result<(OwnedFd, u16)> {
    // CLOEXEC so redis-server children never inherit (and hold) the port.
    // SAFETY: socket(2) takes no pointers.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if raw == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nobody else; OwnedFd
    // closes it on every return path below.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };

    // SAFETY: sockaddr_in is plain old data, for which all-zeroes is valid
    // (and port 0 asks the kernel to choose).
    let mut addr: libc::sockaddr_in = unsafe { mem::zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_addr.s_addr = u32::from(Ipv4Addr::LOCALHOST).to_be();
    let mut len = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `addr` is a valid sockaddr_in and `len` its size.
    if unsafe { libc::bind(socket.as_raw_fd(), (&raw const addr).cast(), len) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `addr` is writable for `len` bytes, which getsockname fills
    // with the bound address.
    if unsafe { libc::getsockname(socket.as_raw_fd(), (&raw mut addr).cast(), &mut len) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok((socket, u16::from_be(addr.sin_port)))
}

/// Nanoseconds on CLOCK_MONOTONIC: one clock for every process on this
/// machine, so that time intervals recorded by different worker processes
/// can be compared (std's `Instant` cannot be shared across processes).
pub(crate) fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    secs * 1_000_000_000 + nanos
}

/// CPU time this process has used so far (user and system, all threads).
pub(crate) fn process_cpu_time() -> std::time::Duration {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { mem::zeroed() };
    // SAFETY: `usage` is valid and writable for the call's duration.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return std::time::Duration::ZERO;
    }
    let of = |time: libc::timeval| {
        std::time::Duration::new(
            u64::try_from(time.tv_sec).unwrap_or(0),
            u32::try_from(time.tv_usec).unwrap_or(0) * 1000,
        )
    };
    of(usage.ru_utime) + of(usage.ru_stime)
}
