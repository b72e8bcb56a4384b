//! The forms an annotated function arrives in. Attributes expand outermost
//! first, so `#[distributed_lock]` may receive a function that another
//! attribute has already rewritten:
//!
//! - an `async fn`, as written;
//! - a plain `fn` returning `Pin<Box<dyn Future<Output = T> + ..>>` whose
//!   body is `Box::pin(async move { .. })`: what `#[async_trait]` on the
//!   impl block makes of an `async fn` before the attribute on the method
//!   runs. The lock then wraps the inner `async move` block, as
//!   `tracing::instrument` does;
//! - a plain `fn` whose body binds an `async` block to run it on a runtime
//!   it builds: `#[tokio::test]` or `#[tokio::main]` placed above the
//!   attribute. Its body is no future to lock, so it is refused with a
//!   message that says to swap the attributes.

use proc_macro2::Ident;
use syn::{
    Block, Expr, ExprAsync, FnArg, GenericArgument, ItemFn, Pat, PathArguments, ReturnType, Stmt,
    Type, TypeParamBound,
};

/// What the attribute received.
pub(crate) enum Shape<'a> {
    /// An `async fn`; `output` is its return type (`None`: `()`).
    Async { output: Option<&'a Type> },
    /// `#[async_trait]`'s form: `box_pin(future)`, a future of `output`.
    Boxed {
        output: &'a Type,
        box_pin: &'a Expr,
        future: &'a ExprAsync,
    },
    /// A plain `fn` that runs an `async` block on a runtime of its own.
    RuntimeEntry,
    /// Any other plain `fn`.
    NotAsync,
}

/// Which form `function` has.
pub(crate) fn shape(function: &ItemFn) -> Shape<'_> {
    let sig = &function.sig;
    if sig.asyncness.is_some() {
        let output = match &sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, ty) => Some(&**ty),
        };
        return Shape::Async { output };
    }
    if let Some(output) = boxed_output(&sig.output)
        && let Some((box_pin, future)) = boxed_body(&function.block)
    {
        return Shape::Boxed {
            output,
            box_pin,
            future,
        };
    }
    if function.block.stmts.iter().any(binds_async_block) {
        return Shape::RuntimeEntry;
    }
    Shape::NotAsync
}

/// The name `#[async_trait]` gave a destructured parameter (`__arg1`), in
/// its form of a method: the bindings inside the pattern are then out of
/// the key's reach.
pub(crate) fn renamed_by_async_trait(function: &ItemFn) -> Option<&Ident> {
    if function.sig.asyncness.is_some() {
        return None;
    }
    function.sig.inputs.iter().find_map(|input| match input {
        FnArg::Typed(typed) => match &*typed.pat {
            Pat::Ident(binding) if binding.ident.to_string().starts_with("__arg") => {
                Some(&binding.ident)
            }
            _ => None,
        },
        FnArg::Receiver(_) => None,
    })
}

/// `Box::pin` and its `async move` block, in a body that is only
/// `Box::pin(async move {..})`.
fn boxed_body(block: &Block) -> Option<(&Expr, &ExprAsync)> {
    let [Stmt::Expr(Expr::Call(call), None)] = block.stmts.as_slice() else {
        return None;
    };
    match call.args.iter().collect::<Vec<_>>().as_slice() {
        [Expr::Async(future)] if future.capture.is_some() && is_box_pin(&call.func) => {
            Some((&call.func, future))
        }
        _ => None,
    }
}

/// `Box::pin`, however qualified (`::std::boxed::Box::pin`).
fn is_box_pin(func: &Expr) -> bool {
    let Expr::Path(path) = func else {
        return false;
    };
    let names: Vec<_> = path.path.segments.iter().map(|s| &s.ident).collect();
    matches!(names.as_slice(), [.., boxed, pin] if *boxed == "Box" && *pin == "pin")
}

/// `T` in `Pin<Box<dyn Future<Output = T> + ..>>`, however qualified.
fn boxed_output(output: &ReturnType) -> Option<&Type> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let boxed = only_type_argument(ty, "Pin")?;
    let Type::TraitObject(object) = only_type_argument(boxed, "Box")? else {
        return None;
    };
    object.bounds.iter().find_map(|bound| match bound {
        TypeParamBound::Trait(bound) => future_output(&bound.path),
        _ => None,
    })
}

/// `A` in `name<A>` (the last segment of a path type named `name`).
fn only_type_argument<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let Type::Path(path) = ty else {
        return None;
    };
    let segment = path.path.segments.last()?;
    let PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [GenericArgument::Type(inner)] if segment.ident == name => Some(inner),
        _ => None,
    }
}

/// `T` in `Future<Output = T>`.
fn future_output(path: &syn::Path) -> Option<&Type> {
    let segment = path.segments.last().filter(|s| s.ident == "Future")?;
    let PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    args.args.iter().find_map(|arg| match arg {
        GenericArgument::AssocType(assoc) if assoc.ident == "Output" => Some(&assoc.ty),
        _ => None,
    })
}

/// `let body = async { .. };`, as `#[tokio::main]` and `#[tokio::test]`
/// begin the function they rewrite.
fn binds_async_block(stmt: &Stmt) -> bool {
    matches!(stmt, Stmt::Local(local)
        if local.init.as_ref().is_some_and(|init| matches!(*init.expr, Expr::Async(_))))
}
