//! Escaping text for the HTML and XML stampede writes (the timeline, the suite's index page,
//! its JUnit report, the results browser).

/// `text` escaped for HTML or XML content and quoted attribute values: the five markup
/// characters become references, a line break becomes `&#10;` (so it survives inside an
/// attribute), and control characters XML 1.0 cannot hold are dropped (tab and carriage
/// return stay).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_are_escaped_or_dropped() {
        assert_eq!(
            escape("a<b> & \"c\" 'd'\ne\tf\u{1}g"),
            "a&lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;&#10;e\tfg"
        );
        assert_eq!(escape("zookeeper — ü"), "zookeeper — ü");
    }
}
