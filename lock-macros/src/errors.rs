//! One collector for every mistake the attribute finds, so that a single
//! build reports all of them (as serde's `Ctxt` does).

/// The mistakes found so far.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Records one mistake.
    pub(crate) fn push(&mut self, error: syn::Error) {
        match self.0.as_mut() {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// Records the mistake in `result`, if any, and gives back its value.
    pub(crate) fn take<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|error| self.push(error)).ok()
    }

    /// Every mistake as one error, or `Ok` when there was none.
    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}
