//! Lock key templates: `"stock:<id>"` is the literal `stock:` followed by
//! the parameter `id`, rendered with `Display`. A placeholder names a
//! parameter binding, `self`, or a field path of one (`<order.id>`,
//! `<self.shard>`, `<pair.0>`). `<<` and `>>` stand for a literal `<`, `>`.

use crate::errors::Errors;
use proc_macro2::{Literal, Punct, Spacing, Span, TokenStream};
use quote::{TokenStreamExt, quote};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::{Ident, LitStr};

/// One piece of a template.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Text copied into the key as is.
    Literal(String),
    /// A value rendered with `Display`: its root binding and field path.
    Placeholder(Vec<Part>),
}

/// One step of a placeholder's path.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// A name, without any `r#`; `raw` when it needs one (a keyword).
    Name { name: String, raw: bool },
    /// A tuple field: `pair.0`.
    Index(usize),
}

impl Part {
    fn name(name: &str) -> Self {
        Part::Name {
            name: name.to_owned(),
            raw: false,
        }
    }
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

/// `order.id` -> [order, id]: the root is a binding name (or `self`), the
/// rest field names or tuple indices.
fn parse_path(path: &str) -> Result<Vec<Part>, String> {
    if path.trim().is_empty() {
        return Err("empty placeholder `<>` in the key; name a parameter, e.g. `<id>`".into());
    }
    let not_a_path =
        || format!("`<{path}>` is not a parameter name or a field path such as `<order.id>`");
    let mut parts = Vec::new();
    for (i, text) in path.split('.').enumerate() {
        let part = if i > 0 && !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            let index = text
                .parse()
                .map_err(|_| format!("`{text}` in `<{path}>` is too large for a tuple index"))?;
            Part::Index(index)
        } else if i == 0 && text == "self" {
            Part::name("self")
        } else {
            name_part(text).ok_or_else(not_a_path)?
        };
        parts.push(part);
    }
    Ok(parts)
}

/// A Rust identifier (raw or not), or a keyword usable as a raw one.
fn name_part(text: &str) -> Option<Part> {
    if !identifier_like(text.trim()) {
        return None;
    }
    if let Ok(ident) = syn::parse_str::<Ident>(text) {
        let raw = text.starts_with("r#");
        return Some(Part::Name {
            name: ident.unraw().to_string(),
            raw,
        });
    }
    let keyword = Ident::parse_any.parse_str(text).ok()?;
    let name = keyword.to_string();
    // These cannot be raw identifiers, so they cannot name a field.
    if ["self", "Self", "super", "crate", "_"].contains(&name.as_str()) {
        return None;
    }
    Some(Part::Name { name, raw: true })
}

/// Whether `text` holds only what an identifier can: an optional `r#`,
/// then a letter or `_`, then letters, digits and `_`. Checked before the
/// text reaches the Rust lexer, which inside a macro reports some mistakes
/// itself, at the whole attribute (`id#` is a reserved prefix, `1e` a
/// number without its exponent), besides the error said at the literal.
pub(crate) fn identifier_like(text: &str) -> bool {
    let bare = text.strip_prefix("r#").unwrap_or(text);
    let mut chars = bare.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
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

    /// The template as written, for the lock's metrics and traces.
    /// The key literal, where its mistakes are reported.
    pub(crate) fn span(&self) -> Span {
        self.lit.span()
    }

    pub(crate) fn text(&self) -> String {
        self.lit.value()
    }

    /// Checks that every placeholder names one of `bindings` (the
    /// function's parameter bindings, plus `self` for a method).
    pub(crate) fn check(&self, bindings: &[Ident]) -> syn::Result<()> {
        let mut errors = Errors::default();
        for root in self.roots() {
            if find(bindings, root).is_some() {
                continue;
            }
            let message = if bindings.is_empty() {
                format!("unknown placeholder `<{root}>`: this function has no parameters")
            } else {
                let names: Vec<String> = bindings
                    .iter()
                    .map(|b| format!("`{}`", b.unraw()))
                    .collect();
                format!(
                    "unknown placeholder `<{root}>`: the parameters are {}",
                    names.join(", ")
                )
            };
            errors.push(syn::Error::new(self.lit.span(), message));
        }
        errors.finish()
    }

    /// The parameter each placeholder starts with (`order` in
    /// `<order.id>`).
    pub(crate) fn roots(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|segment| match segment {
            Segment::Placeholder(path) => match path.first() {
                Some(Part::Name { name, .. }) => Some(name.as_str()),
                _ => None,
            },
            Segment::Literal(_) => None,
        })
    }

    /// An expression that renders the key (`String`); `format!` borrows
    /// the placeholders' values, so no argument is moved or cloned.
    /// Call after a successful [`Self::check`] with the same bindings.
    pub(crate) fn render(&self, bindings: &[Ident]) -> TokenStream {
        let span = self.lit.span();
        let mut format = String::new();
        let mut values = Vec::new();
        for segment in &self.segments {
            match segment {
                Segment::Literal(text) => {
                    format.push_str(&text.replace('{', "{{").replace('}', "}}"));
                }
                Segment::Placeholder(path) => {
                    format.push_str("{}");
                    values.push(path_tokens(path, bindings, span));
                }
            }
        }
        let format = LitStr::new(&format, span);
        quote! { ::std::format!(#format #(, #values)*) }
    }
}

/// The binding a placeholder root names, compared without `r#`.
fn find<'a>(bindings: &'a [Ident], root: &str) -> Option<&'a Ident> {
    bindings.iter().find(|b| b.unraw() == root)
}

/// [order, id] -> `order.id`. The root keeps its binding's hygiene (so it
/// resolves even when the function was written by a `macro_rules!`), and
/// everything points at the key literal for errors.
fn path_tokens(path: &[Part], bindings: &[Ident], span: Span) -> TokenStream {
    let mut tokens = TokenStream::new();
    for (i, part) in path.iter().enumerate() {
        if i > 0 {
            let mut dot = Punct::new('.', Spacing::Alone);
            dot.set_span(span);
            tokens.append(dot);
        }
        match part {
            Part::Index(index) => {
                let mut index = Literal::usize_unsuffixed(*index);
                index.set_span(span);
                tokens.append(index);
            }
            Part::Name { name, .. } if i == 0 => {
                // `check` ran first, so the binding exists; the fallback only
                // keeps this total.
                let mut root = find(bindings, name)
                    .cloned()
                    .unwrap_or_else(|| Ident::new(name, span));
                root.set_span(span.resolved_at(root.span()));
                tokens.append(root);
            }
            // A field keeps the macro's own context, located at the key:
            // an unknown field is still reported there, but without the
            // compiler's "similar name" fix, which would replace the whole
            // key literal with the field's name (`key = id`).
            Part::Name { name, raw: true } => {
                tokens.append(Ident::new_raw(name, Span::mixed_site().located_at(span)));
            }
            Part::Name { name, raw: false } => {
                tokens.append(Ident::new(name, Span::mixed_site().located_at(span)));
            }
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholder(path: &[&str]) -> Segment {
        Segment::Placeholder(
            path.iter()
                .map(|p| match p.parse() {
                    Ok(index) => Part::Index(index),
                    Err(_) => Part::name(p),
                })
                .collect(),
        )
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
    fn keywords_and_raw_names_are_raw_parts() {
        let raw = |name: &str| Part::Name {
            name: name.into(),
            raw: true,
        };
        assert_eq!(
            parse_text("<r#type.match>").unwrap(),
            vec![Segment::Placeholder(vec![raw("type"), raw("match")])]
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
            ("stock:<p.a²>", "not a parameter name"),
            ("stock:<p.self>", "not a parameter name"),
            ("stock:<p.99999999999999999999999>", "too large"),
            // What the lexer would read as something else than a name.
            ("stock:<id#>", "not a parameter name"),
            ("stock:<p.1e>", "not a parameter name"),
            ("stock:<p.b\"x\">", "not a parameter name"),
        ];
        for (template, expected) in cases {
            let err = parse_text(template).unwrap_err();
            assert!(err.contains(expected), "`{template}`: {err}");
        }
    }

    #[test]
    fn names_are_told_from_other_text_before_lexing() {
        for name in ["id", "_", "r#type", "名前", "é", " id "] {
            assert!(identifier_like(name.trim()), "{name:?}");
        }
        for text in [
            "", "r#", "1e", "id#", "b#x", "a-b", "a b", "'a", "a\"", "🦀",
        ] {
            assert!(!identifier_like(text), "{text:?}");
        }
    }

    #[test]
    fn braces_are_escaped_for_format() {
        let lit = LitStr::new("{a}:<id>", Span::call_site());
        let id = Ident::new("id", Span::call_site());
        let rendered = KeyTemplate::parse(&lit).unwrap().render(&[id]).to_string();
        assert!(rendered.contains("\"{{a}}:{}\""), "{rendered}");
    }

    #[test]
    fn unknown_placeholders_name_the_parameters() {
        let lit = LitStr::new("stock:<idd>", Span::call_site());
        let template = KeyTemplate::parse(&lit).unwrap();
        let ident = |name: &str| Ident::new(name, Span::call_site());
        let err = template.check(&[ident("id"), ident("qty")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown placeholder `<idd>`: the parameters are `id`, `qty`"
        );
        assert!(template.check(&[ident("idd")]).is_ok());
        let raw_type = Ident::new_raw("type", Span::call_site());
        let keyword = KeyTemplate::parse(&LitStr::new("<type>", Span::call_site())).unwrap();
        assert!(keyword.check(&[raw_type]).is_ok());
    }
}
