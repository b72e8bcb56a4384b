//! Code generation: the annotated `async fn` keeps its signature; its body
//! becomes an `async move` block that runs only once the lock is held.
//!
//! ```text
//! async fn deduct(id: u64) -> Result<Receipt, AppError> {
//!     let key = format!("stock:{}", id);              // borrows, moves nothing
//!     let locker = <global, or the `locker` argument>;
//!     let body = async move { <the original body> };
//!     match __private::run_locked(locker, key, options, body).await {
//!         Ok(ret) => ret,
//!         Err(lock_error) => Err(E::from(lock_error)),   // spanned at the return type
//!     }
//! }
//! ```

use proc_macro2::{Group, TokenTree};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, Path, ReturnType, Type};

use crate::args::{LockArgs, OnLost};

/// The whole attribute: parse, check, generate. On any error the original
/// item is emitted unchanged next to the errors, so the rest of the crate
/// keeps type-checking and editors keep working.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let function: ItemFn = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new(
                first_token_span(&item),
                "`#[distributed_lock]` goes on an `async fn`",
            );
            return with_errors(item, error);
        }
    };
    let args = LockArgs::parse(args);
    let checked = check_function(&function);
    match (args, checked) {
        (Ok(args), Ok(())) => match args.key.check(&bindings(&function)) {
            Ok(()) => generate(&args, function),
            Err(error) => with_errors(item, error),
        },
        (Err(mut error), Err(more)) => {
            error.combine(more);
            with_errors(item, error)
        }
        (Err(error), Ok(())) | (Ok(_), Err(error)) => with_errors(item, error),
    }
}

fn with_errors(item: TokenStream, error: syn::Error) -> TokenStream {
    let errors = error.into_compile_error();
    quote! { #item #errors }
}

fn first_token_span(item: &TokenStream) -> Span {
    item.clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |token| token.span())
}

/// The shape rules: an `async fn` returning some `Result`.
fn check_function(function: &ItemFn) -> syn::Result<()> {
    let sig = &function.sig;
    let mut errors: Vec<syn::Error> = Vec::new();
    if sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            sig.fn_token.span,
            "`#[distributed_lock]` needs an `async fn`: the lock is acquired with `.await`",
        ));
    }
    let result_hint = "so that a lock failure has somewhere to go: return `Result<T, E>` with `E: From<lock_runtime::LockError>`";
    match &sig.output {
        ReturnType::Default => errors.push(syn::Error::new(
            sig.paren_token.span.close(),
            format!("`#[distributed_lock]` functions must return a `Result`, {result_hint}"),
        )),
        ReturnType::Type(_, ty) if !is_result(ty) => errors.push(syn::Error::new_spanned(
            ty,
            format!("`#[distributed_lock]` functions must return a `Result`, {result_hint}"),
        )),
        ReturnType::Type(..) => {}
    }
    let mut errors = errors.into_iter();
    match errors.next() {
        None => Ok(()),
        Some(mut first) => {
            errors.for_each(|e| first.combine(e));
            Err(first)
        }
    }
}

/// `Result<..>`, `io::Result<..>`, `anyhow::Result<..>`, `AppResult<..>`:
/// any path type whose last segment names a `...Result`. (Whether its error
/// type converts from `LockError` is left to the type checker, which then
/// points at the return type.)
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident.to_string().ends_with("Result")),
        Type::Paren(inner) => is_result(&inner.elem),
        Type::Group(inner) => is_result(&inner.elem),
        _ => false,
    }
}

/// The names a key placeholder may start with: every binding of every
/// parameter pattern, and `self` for a method.
fn bindings(function: &ItemFn) -> Vec<String> {
    let mut names = Vec::new();
    for input in &function.sig.inputs {
        match input {
            FnArg::Receiver(_) => names.push("self".to_owned()),
            FnArg::Typed(typed) => collect_bindings(&typed.pat, &mut names),
        }
    }
    names
}

fn collect_bindings(pat: &Pat, names: &mut Vec<String>) {
    match pat {
        Pat::Ident(ident) => {
            names.push(ident.ident.to_string());
            if let Some((_, sub)) = &ident.subpat {
                collect_bindings(sub, names);
            }
        }
        Pat::Tuple(tuple) => tuple.elems.iter().for_each(|p| collect_bindings(p, names)),
        Pat::TupleStruct(tuple) => tuple.elems.iter().for_each(|p| collect_bindings(p, names)),
        Pat::Struct(strukt) => strukt
            .fields
            .iter()
            .for_each(|f| collect_bindings(&f.pat, names)),
        Pat::Slice(slice) => slice.elems.iter().for_each(|p| collect_bindings(p, names)),
        Pat::Reference(reference) => collect_bindings(&reference.pat, names),
        Pat::Paren(paren) => collect_bindings(&paren.pat, names),
        Pat::Type(typed) => collect_bindings(&typed.pat, names),
        _ => {}
    }
}

fn generate(args: &LockArgs, function: ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        modifiers,
        sig,
        block,
    } = function;
    let default_crate: Path = syn::parse_quote!(::lock_runtime);
    let krate = args.krate.as_ref().unwrap_or(&default_crate);
    let private = quote!(#krate::__private);

    // Invented names use mixed-site hygiene: the user's body cannot see
    // them, and they cannot shadow the user's names.
    let key = Ident::new("__lock_key", Span::mixed_site());
    let locker = Ident::new("__lock_locker", Span::mixed_site());
    let body = Ident::new("__lock_body", Span::mixed_site());
    let ret = Ident::new("__lock_ret", Span::mixed_site());
    let error = Ident::new("__lock_error", Span::mixed_site());

    let render_key = args.key.render();
    let locker_source = match &args.locker {
        Some(expr) => quote_spanned!(expr.span()=> #private::locker_from(&(#expr))),
        None => quote!(#private::global_locker()),
    };
    let duration = |arg: &Option<crate::duration::DurationArg>| match arg {
        Some(d) => {
            let nanos = d.nanos;
            quote!(::core::option::Option::Some(::core::time::Duration::from_nanos(#nanos)))
        }
        None => quote!(::core::option::Option::None),
    };
    let (ttl, wait) = (duration(&args.ttl), duration(&args.wait));
    let watchdog = args.watchdog.unwrap_or(true);
    let on_lost = match args.on_lost {
        OnLost::Cancel => quote!(#private::OnLost::Cancel),
        OnLost::Continue => quote!(#private::OnLost::Continue),
    };
    // Spanned at the return type: "`AppError: From<LockError>` is not
    // satisfied" then points where the user can fix it.
    let return_span = match &sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => Span::call_site(),
    };
    let private_at_return = respan(private.clone(), return_span);
    let convert = quote_spanned! {return_span=>
        ::core::result::Result::Err(#private_at_return::lock_error_into(#error))
    };
    let defaultness = modifiers.defaultness;

    quote! {
        #(#attrs)*
        #vis #defaultness #sig {
            let #key: ::std::string::String = #render_key;
            let #locker = #locker_source;
            let #body = async move #block;
            let #ret = #private::run_locked(
                #locker,
                #key,
                #private::Options {
                    ttl: #ttl,
                    wait: #wait,
                    watchdog: #watchdog,
                    on_lost: #on_lost,
                },
                #body,
            )
            .await;
            match #ret {
                ::core::result::Result::Ok(#ret) => #ret,
                ::core::result::Result::Err(#error) => #convert,
            }
        }
    }
}

/// `tokens` with every span set to `span`, so that the compiler reports a
/// problem with them at `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                token = TokenTree::Group(inner);
            } else {
                token.set_span(span);
            }
            token
        })
        .collect()
}
