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

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{AttrStyle, FnArg, Ident, ItemFn, Pat, Path, ReturnType, Type};

use crate::args::{Complete, LockArgs, OnLost};
use crate::errors::Errors;
use crate::valid;

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
    let bindings = bindings(&function);
    let mut errors = Errors::default();
    // Every check runs, whatever the others found: one build shows every
    // mistake (an unknown argument does not hide an unknown placeholder).
    let args = LockArgs::parse(args, &mut errors);
    valid::check_function(&function, &mut errors);
    if let Some(key) = &args.key {
        errors.take(key.check(&bindings));
    }
    match (errors.finish(), args.complete()) {
        (Ok(()), Some(args)) => generate(&args, &bindings, function),
        (Err(error), _) => with_errors(item, error),
        // An incomplete parse always recorded why.
        (Ok(()), None) => item,
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

fn generate(args: &Complete, bindings: &[Ident], function: ItemFn) -> TokenStream {
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

    let render_key = args.key.render(bindings);
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
    let template = args.key.text();
    let watchdog = args.watchdog.unwrap_or(true);
    let reentrant = args.reentrant;
    let on_lost = match args.on_lost {
        OnLost::Cancel => quote!(#private::OnLost::Cancel),
        OnLost::Continue => quote!(#private::OnLost::Continue),
    };
    // Spanned at the return type: "`AppError: From<LockError>` is not
    // satisfied", or "must return a `Result`" for a type of the user's own,
    // then points where the user can fix it.
    let return_span = match &sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => Span::call_site(),
    };
    let private_at_return = respan(private.clone(), return_span);
    let convert = quote_spanned! {return_span=>
        #private_at_return::lock_error_into(#error)
    };
    let defaultness = modifiers.defaultness;
    // `#![...]` at the top of the body stays at the top of the new body.
    let (inner_attrs, outer_attrs): (Vec<_>, Vec<_>) = attrs
        .into_iter()
        .partition(|attr| matches!(attr.style, AttrStyle::Inner(_)));
    // Pin the body's type to the declared return type, so that a mistake in
    // the body is reported in the body, not at the attribute: a `return`
    // never taken fixes the block's output before the body's own `return`s
    // and its value are checked against it. (`impl Trait` cannot be named
    // there; such bodies are left to inference.) The body's statements
    // follow, ending in its value, rather than `let ret: T = body; ret`:
    // after a body that never ends (`loop {}`, `todo!()`) nothing generated
    // is unreachable, so crates that forbid `unreachable_code` can use the
    // attribute.
    let pin_output = match &sig.output {
        ReturnType::Type(_, ty) if !mentions_impl(ty) => quote! {
            if false {
                return #private::declared_output::<#ty>();
            }
        },
        _ => TokenStream::new(),
    };
    let stmts = &block.stmts;

    quote! {
        #(#outer_attrs)*
        #vis #defaultness #sig {
            #(#inner_attrs)*
            let #key: ::std::string::String = #render_key;
            let #locker = #locker_source;
            let #body = async move {
                #pin_output
                #(#stmts)*
            };
            let #ret = #private::run_locked(
                #locker,
                #key,
                #private::Options {
                    ttl: #ttl,
                    wait: #wait,
                    watchdog: #watchdog,
                    on_lost: #on_lost,
                    reentrant: #reentrant,
                    max_hold: #max_hold,
                    template: #template,
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
