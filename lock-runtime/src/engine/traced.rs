//! Running work in a span only when someone records it.

use std::future::Future;

use futures_util::future::Either;
use tracing::Span;
use tracing::instrument::{Instrument, Instrumented};

/// `work` inside `span` (entered at each poll), or, when no subscriber
/// records the span, `work` as it is: a disabled span would be entered
/// and left for nothing at every poll of every lock call.
///
/// A plain function, not an `async fn`: that would hold `work` twice
/// (as its argument and inside the span's wrapper), and the attempt's
/// future is large enough for each copy to cost.
pub(crate) fn in_span<F: Future>(span: &Span, work: F) -> Either<F, Instrumented<F>> {
    if span.is_disabled() {
        Either::Left(work)
    } else {
        Either::Right(work.instrument(span.clone()))
    }
}
