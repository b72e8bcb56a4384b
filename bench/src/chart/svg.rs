//! [`Svg`]: a minimal SVG writer, just the shapes the chart uses.

use std::fmt::Write as _;

/// An SVG document being written.
#[derive(Debug)]
pub struct Svg {
    out: String,
}

impl Svg {
    /// A white canvas of `width` × `height` pixels.
    pub fn new(width: f64, height: f64) -> Self {
        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif">"#
        );
        let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
        Self { out }
    }

    /// A straight line; `dash` is an SVG dash array or empty.
    pub fn line(&mut self, from: (f64, f64), to: (f64, f64), stroke: &str, width: f64, dash: &str) {
        let _ = writeln!(
            self.out,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{stroke}" stroke-width="{width}" stroke-dasharray="{dash}"/>"#,
            from.0, from.1, to.0, to.1
        );
    }

    /// An open line through `points`.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, width: f64) {
        let mut list = String::with_capacity(points.len() * 14);
        for (x, y) in points {
            let _ = write!(list, "{x:.1},{y:.1} ");
        }
        let _ = writeln!(
            self.out,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="{width}" stroke-linejoin="round"/>"#,
            list.trim_end()
        );
    }

    /// A filled rectangle.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str) {
        let _ = writeln!(
            self.out,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{fill}"/>"#,
            w.max(0.0)
        );
    }

    /// Text anchored `start`, `middle` or `end` at (x, y).
    pub fn text(&mut self, x: f64, y: f64, text: &str, anchor: &str, size: f64, weight: &str) {
        let _ = writeln!(
            self.out,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" font-size="{size}" font-weight="{weight}">{}</text>"#,
            escape(text)
        );
    }

    /// The finished document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// `text` with XML's special characters escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_closed_document() {
        let mut svg = Svg::new(10.0, 10.0);
        svg.text(1.0, 2.0, "a < b & c", "start", 12.0, "normal");
        let doc = svg.finish();
        assert!(doc.starts_with("<svg") && doc.ends_with("</svg>\n"));
        assert!(doc.contains("a &lt; b &amp; c"));
    }
}
