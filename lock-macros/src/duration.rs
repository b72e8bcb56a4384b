//! Human durations (`"250ms"`, `"3s"`, `"1m30s"`) parsed at compile time, so
//! a typo is a build error instead of a surprise in production.

use std::time::Duration;

use syn::LitStr;

/// A duration written in the attribute, kept with its literal for spans.
pub(crate) struct DurationArg {
    pub(crate) nanos: u64,
}

/// Parses `lit` as a human duration; `what` names the argument in errors.
pub(crate) fn parse(lit: &LitStr, what: &str) -> syn::Result<DurationArg> {
    let text = lit.value();
    let duration = parse_text(&text).map_err(|reason| {
        syn::Error::new(
            lit.span(),
            format!("`{what}`: {reason}; write a duration such as \"250ms\", \"3s\" or \"1m30s\""),
        )
    })?;
    let nanos = u64::try_from(duration.as_nanos())
        .map_err(|_| syn::Error::new(lit.span(), format!("`{what}` is too long")))?;
    Ok(DurationArg { nanos })
}

/// The parsing itself, separate from spans so that it can be unit tested.
pub(crate) fn parse_text(text: &str) -> Result<Duration, String> {
    if text.trim().is_empty() {
        return Err("the duration is empty".to_owned());
    }
    humantime::parse_duration(text).map_err(|err| format!("`{text}` is not a duration ({err})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_usual_forms() {
        assert_eq!(parse_text("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_text("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_text("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_text("1m 30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_text("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_text("2h").unwrap(), Duration::from_secs(7200));
    }

    #[test]
    fn rejects_what_is_not_a_duration() {
        for bad in ["", " ", "3", "three seconds", "3 parsecs", "-1s", "s3"] {
            assert!(parse_text(bad).is_err(), "accepted `{bad}`");
        }
    }
}
