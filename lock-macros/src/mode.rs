//! `mode = "read" | "write"`: which side of a read/write lock the call
//! takes; without it, the exclusive lock.

use proc_macro2::TokenStream;
use quote::quote;
use syn::LitStr;

/// The lock a call takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The exclusive lock (no `mode`).
    Exclusive,
    /// A read of the read/write lock: beside other readers.
    Read,
    /// The write of the read/write lock: alone.
    Write,
}

/// Reads `mode = ".."`.
pub(crate) fn parse(lit: &LitStr) -> syn::Result<Mode> {
    match lit.value().as_str() {
        "read" => Ok(Mode::Read),
        "write" => Ok(Mode::Write),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "`mode` is \"read\" (beside other readers) or \"write\" (alone) of a read/write lock, not \"{other}\"; leave it out for the exclusive lock"
            ),
        )),
    }
}

/// The runtime's value for `mode`.
pub(crate) fn tokens(mode: Mode, private: &TokenStream) -> TokenStream {
    match mode {
        Mode::Exclusive => quote!(#private::Mode::Exclusive),
        Mode::Read => quote!(#private::Mode::Read),
        Mode::Write => quote!(#private::Mode::Write),
    }
}
