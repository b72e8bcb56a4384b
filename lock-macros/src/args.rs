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

const VALID: &str = "`key`, `keys`, `ttl`, `wait`, `watchdog`, `fair`, `on_lost`, `on_release_error`, `reentrant`, `max_hold`, `mode`, `limit`, `permits`, `locker` and `crate`";

/// The runtime's `MULTI_MAX_KEYS`: the most keys one call may take at
/// once.
const MAX_KEYS: usize = 1024;

/// The runtime's `SEMAPHORE_MAX_LIMIT`: every acquisition of a semaphore
/// reads the claims of every permit held.
const MAX_LIMIT: u32 = 1024;

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
    pub(crate) key: Option<Keys>,
    rest: Partial,
}

/// What a call locks: one key (`key = ".."`), or several at once
/// (`keys = ["..", ".."]`).
pub(crate) enum Keys {
    One(KeyTemplate),
    Several(Vec<KeyTemplate>),
}

impl Keys {
    /// Every template, in the order written.
    pub(crate) fn templates(&self) -> &[KeyTemplate] {
        match self {
            Keys::One(key) => std::slice::from_ref(key),
            Keys::Several(keys) => keys,
        }
    }

    /// The templates as written, for the lock's metrics and traces.
    pub(crate) fn text(&self) -> String {
        let texts: Vec<String> = self.templates().iter().map(KeyTemplate::text).collect();
        texts.join(", ")
    }
}

/// The arguments of an attribute without mistakes, ready to generate from.
pub(crate) struct Complete {
    pub(crate) key: Keys,
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
    /// `limit` and `permits`: the call takes permits of a semaphore
    /// instead of the lock.
    pub(crate) semaphore: Option<Permits>,
    pub(crate) locker: Option<Expr>,
    pub(crate) krate: Option<Path>,
}

/// `limit = K` (and `permits = n`, default 1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Permits {
    pub(crate) limit: u32,
    pub(crate) permits: u32,
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
        let mut keys_at = None;
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
                    .map(|t| {
                        if key.is_none() {
                            key = Some(Keys::One(t));
                        }
                    }),
                "keys" => {
                    keys_at = Some(name.span());
                    if let Some(t) = templates(&value, errors) {
                        key = Some(Keys::Several(t));
                    }
                    Ok(())
                }
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
                "reentrant" => boolean(&value, &label).map(|b| {
                    args.reentrant = Some(b);
                    args.reentrant_at = Some(name.span());
                }),
                "fair" => boolean(&value, &label).map(|b| {
                    args.fair = Some(b);
                    args.fair_at = Some(name.span());
                }),
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
                "limit" => count(&value, &label, MAX_LIMIT).map(|n| args.limit = Some((n, name.span()))),
                "permits" => count(&value, &label, MAX_LIMIT).map(|n| args.permits = Some((n, name.span()))),
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
        args.check_semaphore(errors);
        if let Some(at) = keys_at {
            args.check_keys(at, seen.iter().any(|label| label == "key"), errors);
        }
        // A `key` that was given but invalid already has its own error.
        if !seen.iter().any(|label| label == "key" || label == "keys") {
            errors.push(syn::Error::new(
                Span::call_site(),
                "missing `key`: name the lock, e.g. `#[distributed_lock(key = \"stock:<id>\")]` (or several at once: `keys = [\"acct:<from>\", \"acct:<to>\"]`)",
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
            semaphore: rest.limit.map(|(limit, _)| Permits {
                limit,
                permits: rest.permits.map_or(1, |(permits, _)| permits),
            }),
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
    /// With where each was written, for the errors that relate them.
    limit: Option<(u32, Span)>,
    permits: Option<(u32, Span)>,
    reentrant_at: Option<Span>,
    fair_at: Option<Span>,
    locker: Option<Expr>,
    krate: Option<Path>,
}

impl Partial {
    /// The mistakes `keys` (written at `at`) makes with the others: one
    /// call takes one lock.
    fn check_keys(&self, at: Span, with_key: bool, errors: &mut Errors) {
        let beside = [
            (
                with_key,
                "`key`: a call takes one key or several; leave one of them out",
            ),
            (
                self.fair == Some(true),
                "`fair = true`: several keys are taken as the exclusive lock takes each, with no line",
            ),
            (
                self.mode.is_some(),
                "`mode`: several keys are taken as the exclusive lock takes each, with no sides",
            ),
            (
                self.limit.is_some(),
                "`limit`: a call takes several keys or permits of a semaphore, not both",
            ),
            (
                self.reentrant.is_some(),
                "`reentrant`: a call with `keys` never runs under an enclosing hold (it is refused under one of its keys)",
            ),
        ];
        for (clash, why) in beside {
            if clash {
                errors.push(syn::Error::new(at, format!("`keys` beside {why}")));
            }
        }
    }

    /// The mistakes only the semaphore's arguments together can make.
    fn check_semaphore(&mut self, errors: &mut Errors) {
        match (self.limit, self.permits) {
            (None, Some((_, at))) => errors.push(syn::Error::new(
                at,
                "`permits` needs `limit`: write `limit = 4, permits = 2` to take 2 of a semaphore's 4 permits",
            )),
            (Some((limit, _)), Some((permits, at))) if permits > limit => {
                errors.push(syn::Error::new(
                    at,
                    format!("`permits = {permits}` is more than `limit = {limit}`: the call could never run"),
                ));
            }
            _ => {}
        }
        if let (Some(_), Some(at)) = (self.limit, self.reentrant_at) {
            errors.push(syn::Error::new(
                at,
                "`reentrant` is for a lock; a call with `limit` takes permits of its own, nested or not",
            ));
        }
        if let (Some(_), Some(true), Some(at)) = (self.limit, self.fair, self.fair_at) {
            errors.push(syn::Error::new(
                at,
                "`fair` is for a lock; a call with `limit` takes permits of a semaphore, which keeps no line",
            ));
        }
        if let (Some(_), Some(at)) = (self.limit, self.mode_span) {
            errors.push(syn::Error::new(
                at,
                "`mode` takes a side of the read/write lock and `limit` takes permits of a semaphore: a call takes one; leave one of them out",
            ));
        }
    }
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

/// `keys = ["..", ..]`: an array of one to [`MAX_KEYS`] key templates.
/// Every mistake goes to `errors`, each at its element; None when any.
fn templates(value: &Expr, errors: &mut Errors) -> Option<Vec<KeyTemplate>> {
    let not_an_array = |spanned: &Expr| {
        syn::Error::new_spanned(
            spanned,
            "`keys` takes an array of string literals, e.g. `keys = [\"acct:<from>\", \"acct:<to>\"]`",
        )
    };
    let Expr::Array(array) = ungrouped(value) else {
        errors.push(not_an_array(value));
        return None;
    };
    if array.elems.is_empty() || array.elems.len() > MAX_KEYS {
        errors.push(syn::Error::new_spanned(
            array,
            format!("`keys` names 1 to {MAX_KEYS} keys"),
        ));
        return None;
    }
    let mut templates = Vec::new();
    let mut failed = false;
    for element in &array.elems {
        let parsed = match ungrouped(element) {
            Expr::Lit(ExprLit {
                lit: Lit::Str(lit), ..
            }) => KeyTemplate::parse(lit),
            other => Err(not_an_array(other)),
        };
        match parsed {
            Ok(template) => templates.push(template),
            Err(error) => {
                errors.push(error);
                failed = true;
            }
        }
    }
    (!failed).then_some(templates)
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

/// A whole number from 1 to `most`, written as a literal.
fn count(value: &Expr, name: &str, most: u32) -> syn::Result<u32> {
    let example = if name == "limit" {
        "`limit = 4`"
    } else {
        "`permits = 2`"
    };
    let Expr::Lit(ExprLit {
        lit: Lit::Int(lit), ..
    }) = ungrouped(value)
    else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{name}` takes a whole number, e.g. {example}"),
        ));
    };
    match lit.base10_parse::<u32>() {
        Ok(n) if (1..=most).contains(&n) => Ok(n),
        _ => Err(syn::Error::new(
            lit.span(),
            format!("`{name}` must be 1 to {most}"),
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
