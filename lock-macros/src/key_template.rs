//! Lock key templates: `"stock:<id>"` is the literal `stock:` followed by
//! the parameter `id`, rendered with `Display`. A placeholder names a
//! parameter binding, `self`, or a field path of one (`<order.id>`,
//! `<self.shard>`, `<pair.0>`). `<<` and `>>` stand for a literal `<`, `>`.

use proc_macro2::{Literal, Punct, Spacing, Span, TokenStream};
use quote::{TokenStreamExt, quote};
use syn::{Ident, LitStr};

/// One piece of a template.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Text copied into the key as is.
    Literal(String),
    /// A value rendered with `Display`: its root binding and field path.
    Placeholder(Vec<String>),
}

/// Splits a template into segments, or says what is wrong with it.
pub(crate) fn parse_text(template: &str) -> Result<Vec<Segment>, String> {
    if template.is_empty() {
        return Err(
            "the lock key is empty; name the resource it guards, e.g. \"stock:<id>\"".into(),
        );
    }
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' if chars.peek() == Some(&'<') => {
                chars.next();
                literal.push('<');
            }
            '>' if chars.peek() == Some(&'>') => {
                chars.next();
                literal.push('>');
            }
            '>' => {
                return Err("a lone `>` in the key; write `>>` for a literal `>`".into());
            }
            '<' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('>') => break,
                        Some(c) => name.push(c),
                        None => {
                            return Err(format!(
                                "unclosed `<{name}` in the key; close it with `>`, or write `<<` for a literal `<`"
                            ));
                        }
                    }
                }
                if !literal.is_empty() {
                    segments.push(Segment::Literal(std::mem::take(&mut literal)));
                }
                segments.push(Segment::Placeholder(parse_path(&name)?));
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}

/// `order.id` -> ["order", "id"]; the root must be an identifier, the
/// rest identifiers or tuple indices.
fn parse_path(name: &str) -> Result<Vec<String>, String> {
    if name.trim().is_empty() {
        return Err("empty placeholder `<>` in the key; name a parameter, e.g. `<id>`".into());
    }
    let parts: Vec<String> = name.split('.').map(str::to_owned).collect();
    for (i, part) in parts.iter().enumerate() {
        let ok = if i == 0 {
            is_identifier(part)
        } else {
            is_identifier(part) || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        };
        if !ok {
            return Err(format!(
                "`<{name}>` is not a parameter name or a field path such as `<order.id>`"
            ));
        }
    }
    Ok(parts)
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
        && text != "_"
}

/// A parsed template, ready to render.
pub(crate) struct KeyTemplate {
    lit: LitStr,
    segments: Vec<Segment>,
}

impl KeyTemplate {
    /// Parses the `key` literal; errors are spanned at it.
    pub(crate) fn parse(lit: &LitStr) -> syn::Result<Self> {
        let segments = parse_text(&lit.value()).map_err(|m| syn::Error::new(lit.span(), m))?;
        Ok(Self {
            lit: lit.clone(),
            segments,
        })
    }

    /// Checks that every placeholder names one of `bindings` (the
    /// function's parameter bindings, plus `self` for a method).
    pub(crate) fn check(&self, bindings: &[String]) -> syn::Result<()> {
        let mut errors: Option<syn::Error> = None;
        for segment in &self.segments {
            let Segment::Placeholder(path) = segment else {
                continue;
            };
            let root = &path[0];
            if bindings.iter().any(|b| b == root) {
                continue;
            }
            let message = if bindings.is_empty() {
                format!("unknown placeholder `<{root}>`: this function has no parameters")
            } else {
                let names: Vec<String> = bindings.iter().map(|b| format!("`{b}`")).collect();
                format!(
                    "unknown placeholder `<{root}>`: the parameters are {}",
                    names.join(", ")
                )
            };
            let error = syn::Error::new(self.lit.span(), message);
            match errors.as_mut() {
                Some(all) => all.combine(error),
                None => errors = Some(error),
            }
        }
        errors.map_or(Ok(()), Err)
    }

    /// An expression that renders the key (`String`) by borrowing the
    /// placeholders' values, so no argument is moved or cloned.
    pub(crate) fn render(&self) -> TokenStream {
        let span = self.lit.span();
        let mut format = String::new();
        let mut values = Vec::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(text) => {
                    format.push_str(&text.replace('{', "{{").replace('}', "}}"))
                }
                Segment::Placeholder(path) => {
                    format.push_str("{}");
                    values.push(path_tokens(path, span));
                }
            }
        }
        let format = LitStr::new(&format, span);
        quote! { ::std::format!(#format #(, #values)*) }
    }
}

/// `["order", "id"]` -> `order.id` (which `format!` borrows), spanned at the key literal so that the
/// names resolve to the user's bindings and errors point at the key.
fn path_tokens(path: &[String], span: Span) -> TokenStream {
    let mut tokens = TokenStream::new();
    for (i, part) in path.iter().enumerate() {
        if i > 0 {
            let mut dot = Punct::new('.', Spacing::Alone);
            dot.set_span(span);
            tokens.append(dot);
        }
        if part.bytes().all(|b| b.is_ascii_digit()) {
            let mut index = Literal::usize_unsuffixed(part.parse().unwrap_or(0));
            index.set_span(span);
            tokens.append(index);
        } else {
            tokens.append(Ident::new(part, span));
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholder(path: &[&str]) -> Segment {
        Segment::Placeholder(path.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn splits_literals_and_placeholders() {
        assert_eq!(
            parse_text("stock:<id>").unwrap(),
            vec![Segment::Literal("stock:".into()), placeholder(&["id"])]
        );
        assert_eq!(
            parse_text("<order.id>/<self.shard>:<pair.0>").unwrap(),
            vec![
                placeholder(&["order", "id"]),
                Segment::Literal("/".into()),
                placeholder(&["self", "shard"]),
                Segment::Literal(":".into()),
                placeholder(&["pair", "0"]),
            ]
        );
    }

    #[test]
    fn doubled_angle_brackets_are_literals() {
        assert_eq!(
            parse_text("a<<b>>c").unwrap(),
            vec![Segment::Literal("a<b>c".into())]
        );
        assert_eq!(
            parse_text("<<<id>>>").unwrap(),
            vec![
                Segment::Literal("<".into()),
                placeholder(&["id"]),
                Segment::Literal(">".into())
            ]
        );
    }

    #[test]
    fn reports_each_kind_of_mistake() {
        let cases = [
            ("", "empty"),
            ("stock:<>", "empty placeholder"),
            ("stock:<id", "unclosed"),
            ("stock:id>", "lone `>`"),
            ("stock:<a-b>", "not a parameter name"),
            ("stock:<order.>", "not a parameter name"),
            ("stock:<0>", "not a parameter name"),
            ("stock:<_>", "not a parameter name"),
        ];
        for (template, expected) in cases {
            let err = parse_text(template).unwrap_err();
            assert!(err.contains(expected), "`{template}`: {err}");
        }
    }

    #[test]
    fn braces_are_escaped_for_format() {
        let lit = LitStr::new("{a}:<id>", Span::call_site());
        let rendered = KeyTemplate::parse(&lit).unwrap().render().to_string();
        assert!(rendered.contains("\"{{a}}:{}\""), "{rendered}");
    }

    #[test]
    fn unknown_placeholders_name_the_parameters() {
        let lit = LitStr::new("stock:<idd>", Span::call_site());
        let template = KeyTemplate::parse(&lit).unwrap();
        let err = template.check(&["id".into(), "qty".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown placeholder `<idd>`: the parameters are `id`, `qty`"
        );
        assert!(template.check(&["idd".into()]).is_ok());
    }
}
