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
//!         Err(lock_error) => Err(E::from(lock_error)),   // a missing `From` reported at `E`
//!     }
//! }
//! ```
//!
//! A method that `#[async_trait]` has already turned into a plain `fn`
//! returning `Box::pin(async move { .. })` gets the same statements inside
//! that `async move` block (see [`crate::shape`]).

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{AttrStyle, Expr, FnArg, Ident, ItemFn, Local, Pat, Path, Stmt, Type};

use crate::args::{Complete, Keys, LockArgs, OnLost, OnReleaseError};
use crate::errors::Errors;
use crate::key_template::KeyTemplate;
use crate::shape::{self, Shape};
use crate::valid;

/// The whole attribute: parse, check, generate. On any error the original
/// item is emitted unchanged next to the errors, so the rest of the crate
/// keeps type-checking and editors keep working.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let function: ItemFn = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(_) => return with_errors(item.clone(), not_a_function(&item)),
    };
    let bindings = bindings(&function);
    let mut errors = Errors::default();
    // Every check runs, whatever the others found: one build shows every
    // mistake (an unknown argument does not hide an unknown placeholder).
    let args = LockArgs::parse(args, &mut errors);
    valid::check_function(&function, &mut errors);
    for key in args.key.iter().flat_map(Keys::templates) {
        if errors.take(key.check(&bindings)).is_none()
            && let Some(hint) = renamed_parameter_hint(&function, key)
        {
            errors.push(hint);
        }
    }
    match (errors.finish(), args.complete()) {
        (Ok(()), Some(args)) => generate(&args, &bindings, &function),
        (Err(error), _) => with_errors(item, error),
        // An incomplete parse always recorded why.
        (Ok(()), None) => item,
    }
}

/// Why a placeholder can be missing from a method under `#[async_trait]`:
/// that attribute renames a destructured parameter (to `__arg1`) before
/// this one runs, and the names bound inside it are gone from the
/// signature.
fn renamed_parameter_hint(function: &ItemFn, key: &KeyTemplate) -> Option<syn::Error> {
    let renamed = shape::renamed_by_async_trait(function)?;
    Some(syn::Error::new(
        key.span(),
        format!(
            "`#[async_trait]` renamed a destructured parameter to `{renamed}` before \
             `#[distributed_lock]` ran: name the whole parameter in the key, and \
             destructure it in the body"
        ),
    ))
}

fn with_errors(item: TokenStream, error: syn::Error) -> TokenStream {
    let errors = error.into_compile_error();
    quote! { #item #errors }
}

/// Why `item`, which is no function with a body, cannot be locked. A
/// method declared in a trait without a body is an `async fn` all the
/// same: it is told where the body is, at the `;` that stands for it.
fn not_a_function(item: &TokenStream) -> syn::Error {
    if let Ok(declared) = syn::parse2::<syn::TraitItemFn>(item.clone())
        && declared.default.is_none()
        && let Some(semi) = declared.semi_token
    {
        return syn::Error::new(
            semi.span,
            "`#[distributed_lock]` needs the function's body, and a trait's declaration has \
             none: put it on the method in each `impl` block (or on a default body here)",
        );
    }
    syn::Error::new(
        first_token_span(item),
        "`#[distributed_lock]` goes on an `async fn`",
    )
}

fn first_token_span(item: &TokenStream) -> Span {
    item.clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |token| token.span())
}

/// The names a key placeholder may start with: every binding of every
/// parameter pattern, and `self` for a method.
fn bindings(function: &ItemFn) -> Vec<Ident> {
    let mut names = Vec::new();
    for input in &function.sig.inputs {
        match input {
            FnArg::Receiver(receiver) => {
                names.push(Ident::new("self", receiver.self_token.span));
            }
            FnArg::Typed(typed) => collect_bindings(&typed.pat, &mut names),
        }
    }
    names
}

fn collect_bindings(pat: &Pat, names: &mut Vec<Ident>) {
    match pat {
        Pat::Ident(ident) => {
            names.push(ident.ident.clone());
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

fn generate(args: &Complete, bindings: &[Ident], function: &ItemFn) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        modifiers,
        sig,
        block,
    } = function;
    let statements = match shape::shape(function) {
        Shape::Async { output } => locked(args, bindings, output, &block.stmts),
        // `#[async_trait]` already boxed the body: the lock goes inside the
        // boxed future, so that it is still taken when the future runs.
        Shape::Boxed {
            output,
            box_pin,
            future,
        } => {
            let body = quiet_key_rebindings(&future.block.stmts, &args.key);
            let locked = locked(args, bindings, Some(output), &body);
            let (async_token, capture) = (future.async_token, future.capture);
            quote!(#box_pin(#async_token #capture { #locked }))
        }
        Shape::RuntimeEntry | Shape::NotAsync => {
            unreachable!("`check_function` refuses a plain `fn`")
        }
    };
    let defaultness = modifiers.defaultness;
    // `#![...]` at the top of the body stays at the top of the new body.
    let (inner_attrs, outer_attrs): (Vec<_>, Vec<_>) = attrs
        .iter()
        .partition(|attr| matches!(attr.style, AttrStyle::Inner(_)));
    quote! {
        #(#outer_attrs)*
        #vis #defaultness #sig {
            #(#inner_attrs)*
            #statements
        }
    }
}

/// The statements that run `body` only while holding the lock and give its
/// output, or the lock failure converted into `output`'s error type.
fn locked(
    args: &Complete,
    bindings: &[Ident],
    output: Option<&Type>,
    body: &[Stmt],
) -> TokenStream {
    let default_crate: Path = syn::parse_quote!(::lock_runtime);
    let krate = args.krate.as_ref().unwrap_or(&default_crate);
    let private = quote!(#krate::__private);

    // Invented names use mixed-site hygiene: the user's body cannot see
    // them, and they cannot shadow the user's names.
    let key = Ident::new("__lock_key", Span::mixed_site());
    let locker = Ident::new("__lock_locker", Span::mixed_site());
    let body_future = Ident::new("__lock_body", Span::mixed_site());
    let ret = Ident::new("__lock_ret", Span::mixed_site());
    let error = Ident::new("__lock_error", Span::mixed_site());

    // One key is a `String`; several, a `Vec<String>` for `lock_all`.
    let (render_key, key_type, run) = match &args.key {
        Keys::One(key) => (
            key.render(bindings),
            quote!(::std::string::String),
            quote!(run_locked),
        ),
        Keys::Several(keys) => {
            let rendered = keys.iter().map(|key| key.render(bindings));
            (
                quote!(::std::vec![#(#rendered),*]),
                quote!(::std::vec::Vec<::std::string::String>),
                quote!(run_locked_all),
            )
        }
    };
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
    let max_hold = duration(&args.max_hold);
    let semaphore = match args.semaphore {
        Some(crate::args::Permits { limit, permits }) => quote! {
            ::core::option::Option::Some(#private::Permits { limit: #limit, permits: #permits })
        },
        None => quote!(::core::option::Option::None),
    };
    let template = args.key.text();
    let watchdog = args.watchdog.unwrap_or(true);
    let reentrant = args.reentrant;
    let fair = args.fair;
    let on_lost = match args.on_lost {
        OnLost::Cancel => quote!(#private::OnLost::Cancel),
        OnLost::Continue => quote!(#private::OnLost::Continue),
    };
    let mode = crate::mode::tokens(args.mode, &private);
    let on_release_error = match args.on_release_error {
        OnReleaseError::Warn => quote!(#private::OnReleaseError::Warn),
        OnReleaseError::Fail => quote!(#private::OnReleaseError::Fail),
    };
    // "must return a `Result`" (for a type of the user's own) is spanned at
    // the return type; a missing `From<LockError>` at the error type, where
    // the user can fix it.
    let return_span = output.map_or_else(Span::call_site, Spanned::span);
    let error_span = output.map_or_else(Span::call_site, error_type_span);
    let convert = convert_lock_error(krate, &error, return_span, error_span);
    // Pin the body's type to the declared return type, so that a mistake in
    // the body is reported in the body, not at the attribute: a `return`
    // never taken fixes the block's output before the body's own `return`s
    // and its value are checked against it. (`impl Trait` cannot be named
    // there; such bodies are left to inference.) The body's statements
    // follow, ending in its value, rather than `let ret: T = body; ret`:
    // after a body that never ends (`loop {}`, `todo!()`) nothing generated
    // is unreachable, so crates that forbid `unreachable_code` can use the
    // attribute.
    let pin_output = match output {
        Some(ty) if !mentions_impl(ty) => quote! {
            if false {
                return #private::declared_output::<#ty>();
            }
        },
        _ => TokenStream::new(),
    };

    quote! {
        let #key: #key_type = #render_key;
        let #locker = #locker_source;
        let #body_future = async move {
            #pin_output
            #(#body)*
        };
        let #ret = #private::#run(
            #locker,
            #key,
            #private::Options {
                ttl: #ttl,
                wait: #wait,
                watchdog: #watchdog,
                fair: #fair,
                on_lost: #on_lost,
                on_release_error: #on_release_error,
                reentrant: #reentrant,
                max_hold: #max_hold,
                mode: #mode,
                semaphore: #semaphore,
                template: #template,
            },
            #body_future,
        )
        .await;
        match #ret {
            ::core::result::Result::Ok(#ret) => #ret,
            ::core::result::Result::Err(#error) => #convert,
        }
    }
}

/// The conversion of a lock failure into the function's return value,
/// `Err(E::from(error))`, through a trait of its own rather than `From`
/// directly, so that an error type without `From<LockError>` gets the
/// library's message instead of rustc's list of every `From` the type has
/// (nine `From<[T; N]>` for a tuple such as axum's `(StatusCode, String)`).
/// The items live in the match arm's block, out of the body's sight.
/// Through a generic `convert` rather than an inline `From::from`, so that
/// functions returning `Result<_, LockError>` do not trip
/// `clippy::useless_conversion`.
fn convert_lock_error(
    krate: &Path,
    error: &Ident,
    return_span: Span,
    error_span: Span,
) -> TokenStream {
    let private = quote!(#krate::__private);
    let private_at_return = respan(private.clone(), return_span);
    let krate_at_error = respan(krate.to_token_stream(), error_span);
    let trait_name = Ident::new("FromLockError", error_span);
    let into_result = Ident::new("into_result", return_span);
    let from_lock_error = Ident::new("from_lock_error", error_span);
    // Two calls, so that each bound is reported where it can be fixed:
    // "not a `Result`" at the return type, a missing `From` at `E`.
    let convert = quote_spanned! {error_span=> #from_lock_error(#error) };
    let wrap = quote_spanned! {return_span=> #into_result(#convert) };
    let into_result_fn = quote_spanned! {return_span=>
        fn #into_result<__R: #private_at_return::ReturnsResult>(
            error: <__R as #private_at_return::ReturnsResult>::Error,
        ) -> __R {
            <__R as #private_at_return::ReturnsResult>::from_error(error)
        }
    };
    quote! {{
        #[diagnostic::on_unimplemented(
            message = "`#[distributed_lock]` returns a lock failure as `Err(E::from(LockError))`, and `{Self}` has no `From<lock_runtime::LockError>`",
            label = "no `From<LockError>`",
            note = "implement `From<lock_runtime::LockError>` for this error type, or return `Result<T, lock_runtime::LockError>`",
            note = "a type of another crate, such as axum's `(StatusCode, String)`, cannot get that `impl` here: wrap it in an error type of your own that implements `From<LockError>` (and, for axum, `IntoResponse`)"
        )]
        trait #trait_name: ::core::marker::Sized {
            fn from_lock_error(error: #krate_at_error::LockError) -> Self;
        }
        #[diagnostic::do_not_recommend]
        impl<__E> #trait_name for __E
        where
            __E: ::core::convert::From<#krate_at_error::LockError>,
        {
            fn from_lock_error(error: #krate_at_error::LockError) -> Self {
                <__E as ::core::convert::From<#krate_at_error::LockError>>::from(error)
            }
        }
        fn #from_lock_error<__E: #trait_name>(error: #krate_at_error::LockError) -> __E {
            <__E as #trait_name>::from_lock_error(error)
        }
        #into_result_fn
        #wrap
    }}
}

/// Where a missing `From<LockError>` is reported: at `E` of a written-out
/// `Result<T, E>`, else (an alias such as `io::Result<T>`) at the whole
/// return type.
fn error_type_span(output: &Type) -> Span {
    if let Type::Path(path) = output
        && let Some(last) = path.path.segments.last()
        && last.ident == "Result"
        && let syn::PathArguments::AngleBracketed(args) = &last.arguments
        && args.args.len() == 2
        && let Some(syn::GenericArgument::Type(error)) = args.args.last()
    {
        return error.span();
    }
    output.span()
}

/// `#[async_trait]` rebinds each parameter at the top of the boxed body
/// (`let sku = sku;`). One that only the key uses would then be reported
/// unused, though the key, rendered outside the body, uses it: those
/// rebindings, and only those, allow it.
fn quiet_key_rebindings(body: &[Stmt], keys: &Keys) -> Vec<Stmt> {
    let roots: Vec<&str> = keys
        .templates()
        .iter()
        .flat_map(KeyTemplate::roots)
        .collect();
    let mut body = body.to_vec();
    for stmt in &mut body {
        if let Stmt::Local(local) = stmt
            && rebinds_one_of(local, &roots)
        {
            local
                .attrs
                .push(syn::parse_quote!(#[allow(unused_variables)]));
        }
    }
    body
}

/// Whether `local` is `let name = name;` for one of `names`.
fn rebinds_one_of(local: &Local, names: &[&str]) -> bool {
    let (Pat::Ident(binding), Some(init)) = (&local.pat, &local.init) else {
        return false;
    };
    let Expr::Path(value) = &*init.expr else {
        return false;
    };
    let name = binding.ident.unraw();
    value.path.is_ident(&binding.ident) && names.iter().any(|root| name == root)
}

/// Whether a type names `impl Trait` anywhere (it cannot stand in a `let`).
fn mentions_impl(ty: &Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            TokenTree::Ident(ident) => ident == "impl",
            TokenTree::Group(group) => walk(group.stream()),
            _ => false,
        })
    }
    walk(ty.to_token_stream())
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
