//! Running work in a span only when someone records it.

use std::future::Future;

use tracing::Span;

/// Runs `work` inside `span` (entered at each poll), or, when no
/// subscriber records the span, as it is: a disabled span would be
/// entered and left for nothing at every poll of every lock call.
pub(crate) async fn in_span<F: Future>(span: &Span, work: F) -> F::Output {
    if span.is_disabled() {
        work.await
    } else {
        tracing::Instrument::instrument(work, span.clone()).await
    }
}
