//! The shape rules for an annotated function: an `async fn` (or
//! `#[async_trait]`'s form of one) returning some `Result`, so that the lock
//! is taken with `.await` and a lock failure has somewhere to go.

use proc_macro2::Span;
use syn::{ItemFn, ReturnType, Type};

use crate::errors::Errors;
use crate::shape::{self, Shape};

/// Records every shape rule `function` breaks.
pub(crate) fn check_function(function: &ItemFn, errors: &mut Errors) {
    let sig = &function.sig;
    let output = match shape::shape(function) {
        Shape::Async { output } => output,
        Shape::Boxed { output, .. } => Some(output),
        Shape::RuntimeEntry => {
            // Spanned at the attribute: it is the attribute that must move.
            errors.push(syn::Error::new(
                Span::call_site(),
                "`#[distributed_lock]` needs an `async fn`, and an attribute above it \
                 (`#[tokio::test]`, `#[tokio::main]`) has already made this one a plain `fn` \
                 that starts a runtime: put `#[distributed_lock]` above that attribute, \
                 or on an `async fn` that this one calls",
            ));
            return;
        }
        Shape::NotAsync => {
            errors.push(syn::Error::new(
                sig.fn_token.span,
                "`#[distributed_lock]` needs an `async fn`: the lock is acquired with `.await`",
            ));
            // The return type is still checked: one build, every mistake.
            match &sig.output {
                ReturnType::Default => None,
                ReturnType::Type(_, ty) => Some(&**ty),
            }
        }
    };
    let result_hint = "so that a lock failure has somewhere to go: return `Result<T, E>` with `E: From<lock_runtime::LockError>`";
    match output {
        None => errors.push(syn::Error::new(
            sig.paren_token.span.close(),
            format!("`#[distributed_lock]` functions must return a `Result`, {result_hint}"),
        )),
        Some(ty) if !is_result(ty) => errors.push(syn::Error::new_spanned(
            ty,
            format!("`#[distributed_lock]` functions must return a `Result`, {result_hint}"),
        )),
        Some(_) => {}
    }
}

/// Whether `ty` can be a `Result`: any path type except well-known types
/// that are not (`Option`, numbers, `String`, ...). Aliases such as
/// `io::Result<T>`, `anyhow::Result<T>` or `Fallible<T>` pass, and so do
/// the user's own types, which only the type checker can tell apart: the
/// generated code bounds the return type by a trait that only `Result`
/// implements, whose message says the same as this check's, at the return
/// type.
fn is_result(ty: &Type) -> bool {
    const NOT_RESULTS: &[&str] = &[
        "Option", "String", "str", "Vec", "Box", "Arc", "Rc", "HashMap", "BTreeMap", "HashSet",
        "BTreeSet", "bool", "char", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32",
        "i64", "i128", "isize", "f32", "f64",
    ];
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| !NOT_RESULTS.contains(&segment.ident.to_string().as_str())),
        Type::Paren(inner) => is_result(&inner.elem),
        Type::Group(inner) => is_result(&inner.elem),
        _ => false,
    }
}
