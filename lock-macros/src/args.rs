//! The attribute's arguments, parsed into [`LockArgs`]. Every mistake is
//! reported at the token that caused it, and all of them in one build.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Ident, Lit, LitBool, LitStr, Path, Token};

use crate::duration::{self, DurationArg};
use crate::errors::Errors;
use crate::key_template::{KeyTemplate, identifier_like};
use crate::mode::{self, Mode};

const VALID: &str = "`key`, `ttl`, `wait`, `watchdog`, `fair`, `on_lost`, `on_release_error`, `reentrant`, `max_hold`, `mode`, `locker` and `crate`";

/// What to do when the lock is lost while the body runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnLost {
    /// Drop the body at its next await and return `LockError::Lost`.
    Cancel,
    /// Let the body finish; the loss is logged.
    Continue,
}

/// What the call answers when the release after its body fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnReleaseError {
    /// The body's output; the failure is logged and counted.
    Warn,
    /// `LockError::ReleaseFailed`, in place of the body's output.
    Fail,
}

/// Everything the attribute said that parsed: the key even when another
/// argument was wrong, so that its placeholders are checked in the same
/// build.
pub(crate) struct LockArgs {
    pub(crate) key: Option<KeyTemplate>,
    rest: Partial,
}

/// The arguments of an attribute without mistakes, ready to generate from.
pub(crate) struct Complete {
    pub(crate) key: KeyTemplate,
    pub(crate) ttl: Option<DurationArg>,
    pub(crate) wait: Option<DurationArg>,
    pub(crate) watchdog: Option<bool>,
    /// `fair = true`: the fair lock, granted in arrival order.
    pub(crate) fair: bool,
    pub(crate) on_lost: OnLost,
    pub(crate) on_release_error: OnReleaseError,
    pub(crate) reentrant: bool,
    pub(crate) max_hold: Option<DurationArg>,
    pub(crate) mode: Mode,
    pub(crate) locker: Option<Expr>,
    pub(crate) krate: Option<Path>,
}

/// `name = value`, before its value is checked.
struct RawArg {
    name: Ident,
    value: Expr,
}

impl Parse for RawArg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(LitStr) {
            let lit: LitStr = input.parse()?;
            return Err(syn::Error::new(
                lit.span(),
                format!("name the argument: write `key = {}`", lit.token()),
            ));
        }
        // parse_any: `crate` is a keyword, yet a valid argument name here.
        let name = Ident::parse_any(input)?;
        input.parse::<Token![=]>()?;
        let value = input.parse()?;
        Ok(Self { name, value })
    }
}

impl LockArgs {
    /// Parses the tokens inside `#[distributed_lock(...)]`, recording every
    /// mistake in `errors`.
    pub(crate) fn parse(tokens: TokenStream, errors: &mut Errors) -> Self {
        let raw = Punctuated::<RawArg, Token![,]>::parse_terminated.parse2(tokens);
        let Some(raw) = errors.take(raw) else {
            return Self {
                key: None,
                rest: Partial::default(),
            };
        };
        let mut seen: Vec<String> = Vec::new();
        let mut key = None;
        let mut args = Partial::default();
        for RawArg { name, value } in raw {
            let label = name.unraw().to_string();
            if seen.contains(&label) {
                errors.push(syn::Error::new(
                    name.span(),
                    format!("`{label}` is set more than once"),
                ));
                continue;
            }
            seen.push(label.clone());
            let result = match label.as_str() {
                "key" => string(&value, &label)
                    .and_then(|lit| KeyTemplate::parse(&lit))
                    .map(|t| key = Some(t)),
                "ttl" => string(&value, &label)
                    .and_then(|lit| ttl(&lit))
                    .map(|d| args.ttl = Some(d)),
                "wait" => string(&value, &label)
                    .and_then(|lit| duration::parse(&lit, "wait"))
                    .map(|d| args.wait = Some(d)),
                "max_hold" => string(&value, &label)
                    .and_then(|lit| max_hold(&lit))
                    .map(|d| args.max_hold = Some(d)),
                "watchdog" => boolean(&value, &label).map(|b| args.watchdog = Some(b)),
                "reentrant" => boolean(&value, &label).map(|b| args.reentrant = Some(b)),
                "fair" => boolean(&value, &label).map(|b| args.fair = Some(b)),
                "on_lost" => string(&value, &label)
                    .and_then(|lit| on_lost(&lit))
                    .map(|o| args.on_lost = Some(o)),
                "on_release_error" => string(&value, &label)
                    .and_then(|lit| on_release_error(&lit))
                    .map(|o| args.on_release_error = Some(o)),
                "mode" => string(&value, &label)
                    .and_then(|lit| mode::parse(&lit).map(|m| (m, lit.span())))
                    .map(|(m, span)| {
                        args.mode = Some(m);
                        args.mode_span = Some(span);
                    }),
                "locker" => {
                    args.locker = Some(value);
                    Ok(())
                }
                "crate" => string(&value, &label)
                    .and_then(|lit| {
                        let not_a_path = || {
                            syn::Error::new(
                                lit.span(),
                                "`crate` is the path the runtime crate is reached by, e.g. `crate = \"::lock_runtime\"` or `crate = \"my_app::locks\"`",
                            )
                        };
                        if !path_like(&lit.value()) {
                            return Err(not_a_path());
                        }
                        lit.parse::<Path>().map_err(|_| not_a_path())
                    })
                    .map(|p| args.krate = Some(p)),
                _ => Err(syn::Error::new(
                    name.span(),
                    format!("unknown argument `{label}`; the arguments are {VALID}"),
                )),
            };
            if let Err(error) = result {
                errors.push(error);
            }
        }
        // One lock per call: the fair lock has no sides.
        if args.fair == Some(true)
            && let Some(span) = args.mode_span
        {
            errors.push(syn::Error::new(
                span,
                "`mode` takes a side of the read/write lock and `fair = true` takes the fair lock: a call takes one lock; leave one of them out",
            ));
        }
        // A `key` that was given but invalid already has its own error.
        if !seen.iter().any(|label| label == "key") {
            errors.push(syn::Error::new(
                Span::call_site(),
                "missing `key`: name the lock, e.g. `#[distributed_lock(key = \"stock:<id>\")]`",
            ));
        }
        Self { key, rest: args }
    }

    /// The arguments with their defaults, when the key parsed (the caller
    /// generates only when no mistake was recorded).
    pub(crate) fn complete(self) -> Option<Complete> {
        let Self { key, rest } = self;
        Some(Complete {
            key: key?,
            ttl: rest.ttl,
            wait: rest.wait,
            watchdog: rest.watchdog,
            fair: rest.fair.unwrap_or(false),
            on_lost: rest.on_lost.unwrap_or(OnLost::Cancel),
            on_release_error: rest.on_release_error.unwrap_or(OnReleaseError::Warn),
            reentrant: rest.reentrant.unwrap_or(true),
            max_hold: rest.max_hold,
            mode: rest.mode.unwrap_or(Mode::Exclusive),
            locker: rest.locker,
            krate: rest.krate,
        })
    }
}

/// The arguments seen so far.
#[derive(Default)]
struct Partial {
    ttl: Option<DurationArg>,
    wait: Option<DurationArg>,
    watchdog: Option<bool>,
    fair: Option<bool>,
    on_lost: Option<OnLost>,
    on_release_error: Option<OnReleaseError>,
    reentrant: Option<bool>,
    max_hold: Option<DurationArg>,
    mode: Option<Mode>,
    /// Where `mode` was set, for a mistake that involves it.
    mode_span: Option<Span>,
    locker: Option<Expr>,
    krate: Option<Path>,
}

/// `value` without the invisible groups a `macro_rules!` fragment adds.
fn ungrouped(value: &Expr) -> &Expr {
    match value {
        Expr::Group(group) => ungrouped(&group.expr),
        Expr::Paren(paren) => ungrouped(&paren.expr),
        other => other,
    }
}

fn string(value: &Expr, name: &str) -> syn::Result<LitStr> {
    match ungrouped(value) {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(lit.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{name}` takes a string literal, e.g. {}", example(name)),
        )),
    }
}

fn boolean(value: &Expr, name: &str) -> syn::Result<bool> {
    match ungrouped(value) {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(LitBool { value, .. }),
            ..
        }) => Ok(*value),
        other => Err(syn::Error::new_spanned(
            other,
            format!("`{name}` takes `true` or `false`"),
        )),
    }
}

fn example(name: &str) -> &'static str {
    match name {
        "key" => "`key = \"stock:<id>\"`",
        "ttl" => "`ttl = \"3s\"`",
        "wait" => "`wait = \"2s\"`",
        "on_lost" => "`on_lost = \"cancel\"`",
        "on_release_error" => "`on_release_error = \"fail\"`",
        "max_hold" => "`max_hold = \"5m\"`",
        "mode" => "`mode = \"read\"`",
        _ => "`crate = \"my_lock_runtime\"`",
    }
}

fn ttl(lit: &LitStr) -> syn::Result<DurationArg> {
    let ttl = duration::parse(lit, "ttl")?;
    if ttl.nanos == 0 {
        return Err(syn::Error::new(
            lit.span(),
            "`ttl` must be greater than zero: a lease of 0 expires before it is granted",
        ));
    }
    if ttl.nanos > 365 * 24 * 3600 * 1_000_000_000 {
        return Err(syn::Error::new(
            lit.span(),
            "`ttl` must be at most 365 days: a lease is how long a crashed owner blocks everyone",
        ));
    }
    // The runtime's shortest lease (`config::rules::MIN_TTL`): a shorter
    // one leaves too little time, after the clock-drift allowance (ttl/100
    // + 2 ms) and the reaction margin (ttl/20), to use the lock and renew
    // it. Redis takes whole milliseconds, so 9.9ms counts as 9ms.
    if ttl.nanos / 1_000_000 < 10 {
        return Err(syn::Error::new(
            lit.span(),
            "`ttl` must be at least 10ms: a shorter lease leaves too little time, after the clock-drift allowance (ttl/100 + 2ms) and the reaction margin (ttl/20), to use the lock and renew it",
        ));
    }
    Ok(ttl)
}

fn max_hold(lit: &LitStr) -> syn::Result<DurationArg> {
    let cap = duration::parse(lit, "max_hold")?;
    if cap.nanos == 0 {
        return Err(syn::Error::new(
            lit.span(),
            "`max_hold` must be greater than zero: the lock would be given up as soon as it is taken",
        ));
    }
    // The runtime's `config::rules::MAX_HOLD`.
    if cap.nanos > 365 * 24 * 3600 * 1_000_000_000 {
        return Err(syn::Error::new(
            lit.span(),
            "`max_hold` must be at most 365 days",
        ));
    }
    Ok(cap)
}

/// Whether `text` holds only identifiers joined by `::` (with a leading
/// `::` allowed), checked before the Rust lexer sees it (see
/// [`identifier_like`]).
fn path_like(text: &str) -> bool {
    let text = text.trim();
    let text = text.strip_prefix("::").unwrap_or(text);
    text.split("::")
        .all(|segment| identifier_like(segment.trim()))
}

fn on_lost(lit: &LitStr) -> syn::Result<OnLost> {
    match lit.value().as_str() {
        "cancel" => Ok(OnLost::Cancel),
        "continue" => Ok(OnLost::Continue),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "`on_lost` is \"cancel\" (stop the body) or \"continue\" (finish and log), not \"{other}\""
            ),
        )),
    }
}

fn on_release_error(lit: &LitStr) -> syn::Result<OnReleaseError> {
    match lit.value().as_str() {
        "warn" => Ok(OnReleaseError::Warn),
        "fail" => Ok(OnReleaseError::Fail),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "`on_release_error` is \"warn\" (return the body's output, log the failure) or \"fail\" (return `LockError::ReleaseFailed` instead), not \"{other}\""
            ),
        )),
    }
}
