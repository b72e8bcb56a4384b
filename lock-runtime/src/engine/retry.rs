//! One retry of a call whose connection dropped or was refused under it:
//! the manager reconnects meanwhile, and a server that just came back
//! answers the retry, so the first call after a restart is served instead
//! of failing. Only for calls that may run twice (every lock call is
//! idempotent for its token), and never after a timeout: that bound is
//! already spent.

use std::future::Future;

use crate::error::LockError;

/// Whether `err` is worth repeating the call at once: the connection broke
/// under it or was refused. Not a timeout.
pub(crate) fn worth_one_retry(err: &redis::RedisError) -> bool {
    (err.is_connection_dropped() || err.is_unrecoverable_error() || err.is_connection_refusal())
        && !err.is_timeout()
}

/// Runs `call`, and once more if its connection dropped or was refused.
pub(crate) async fn retried_once<T, Fut>(
    what: &str,
    mut call: impl FnMut() -> Fut,
) -> Result<T, LockError>
where
    Fut: Future<Output = Result<T, LockError>>,
{
    match call().await {
        Err(LockError::Redis(err)) if worth_one_retry(&err) => {
            tracing::debug!(error = %err, "{what} met a dropped or refused connection; retrying once");
            call().await
        }
        answer => answer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn failing(kind: std::io::ErrorKind) -> LockError {
        LockError::Redis(redis::RedisError::from(std::io::Error::from(kind)))
    }

    #[tokio::test]
    async fn a_dropped_connection_is_retried_once_and_a_timeout_never() {
        for (kind, calls) in [
            (std::io::ErrorKind::BrokenPipe, 2),
            (std::io::ErrorKind::ConnectionRefused, 2),
            (std::io::ErrorKind::TimedOut, 1),
        ] {
            let made = AtomicUsize::new(0);
            let answer: Result<(), LockError> = retried_once("a call", || {
                made.fetch_add(1, Ordering::SeqCst);
                std::future::ready(Err(failing(kind)))
            })
            .await;
            assert!(answer.is_err());
            assert_eq!(made.load(Ordering::SeqCst), calls, "{kind:?}");
        }
        let made = AtomicUsize::new(0);
        let answer = retried_once("a call", || {
            let first = made.fetch_add(1, Ordering::SeqCst) == 0;
            std::future::ready(if first {
                Err(failing(std::io::ErrorKind::BrokenPipe))
            } else {
                Ok(7)
            })
        })
        .await;
        assert_eq!(answer.unwrap(), 7);
    }
}
