//! The page `imp sim --out DIR` writes as `DIR/index.html`, built as a plain string: a
//! [`Page`] takes headings, paragraphs, tables, preformatted text, seed tables in the
//! Markdown `imp sim --markdown` prints, and plots, and [`Page::finish`] returns one
//! self-contained HTML document.
//!
//! Self-contained means a person can mail the file or open it offline: the style and
//! the one script are inline, every plot is embedded as a `data:` URI (SVG if the plot
//! has one, else PNG), and the page's Content-Security-Policy allows nothing else to be
//! fetched. Every piece of text is escaped (scenario names, descriptions and flow names
//! are user input).
//!
//! The script checks, once the page has loaded, that every plot decoded and has a size
//! on screen, and writes `data-rendered="N plots"` on `<body>` (beside
//! `data-plots="N"`, how many the page embeds); an uncaught error anywhere on the page
//! appends its message to `data-errors` on `<html>`. A headless browser's dumped DOM
//! then tells whether the page rendered (`crates/cli/tests/report_html.rs`).
//!
//! A leaf: it knows nothing of scenarios or reports.

use std::fmt::Write;
use std::path::Path;

/// The style: readable tables, plots scaled to the window.
const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;\
color:#222}table{border-collapse:collapse;margin:0.5em 0 1em}th,td{border:1px solid #bbb;\
padding:2px 8px;text-align:left;vertical-align:top}th{background:#eee}td.n{text-align:right}\
pre{background:#f6f6f6;padding:0.5em;overflow-x:auto}img.plot{max-width:100%;height:auto;\
border:1px solid #ddd}figure{margin:1em 0}figcaption{font-size:90%;color:#555}";

/// The check of the page (see the module docs).
const SCRIPT: &str = "window.onerror=function(message){var root=document.documentElement;\
root.setAttribute('data-errors',(root.getAttribute('data-errors')||'')+message+'\\n');};\
window.addEventListener('load',function(){var shown=0;\
document.querySelectorAll('img.plot').forEach(function(img){var box=img.getBoundingClientRect();\
if(img.complete&&img.naturalWidth>0&&box.width>0&&box.height>0){shown++;}\
else{img.setAttribute('data-broken','');}});\
document.body.setAttribute('data-rendered',shown+' plots');});";

/// Nothing but the inline style and script, and images from `data:` URIs.
const POLICY: &str = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'";

/// An HTML document under construction.
#[derive(Debug, Clone)]
pub struct Page {
    title: String,
    body: String,
    plots: usize,
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, for element content and quoted
/// attribute values alike.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `args` as one line a POSIX shell reads back as the same words: a word of only
/// safe characters as it is, any other in single quotes.
pub fn shell_words(args: &[String]) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%^".contains(c);
    args.iter()
        .map(|word| {
            if !word.is_empty() && word.chars().all(safe) {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Standard base64 (RFC 4648 §4, with padding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Escaped `text` with `` `code` `` spans as `<code>` (the Markdown the seed tables use).
fn inline(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in escape(text).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Whether `cell` reads as a number (right-aligned in a table).
fn numeric(cell: &str) -> bool {
    let trimmed = cell.trim().trim_end_matches('%').trim_end_matches('+');
    !trimmed.is_empty() && trimmed.parse::<f64>().is_ok()
}

impl Page {
    /// An empty page titled `title` (shown as its first heading too).
    pub fn new(title: &str) -> Page {
        let mut page = Page {
            title: title.to_string(),
            body: String::new(),
            plots: 0,
        };
        page.heading(1, title);
        page
    }

    /// A heading of `level` (1 to 6).
    pub fn heading(&mut self, level: u8, text: &str) {
        let level = level.clamp(1, 6);
        let _ = writeln!(self.body, "<h{level}>{}</h{level}>", escape(text));
    }

    /// A paragraph per blank-line-separated block of `text` (nothing for blank text).
    pub fn paragraphs(&mut self, text: &str) {
        for block in text.split("\n\n").map(str::trim).filter(|b| !b.is_empty()) {
            let _ = writeln!(self.body, "<p>{}</p>", escape(block));
        }
    }

    /// `text` as it is, in a fixed-width font (the terminal's tables, a command).
    pub fn preformatted(&mut self, text: &str) {
        let _ = writeln!(self.body, "<pre>{}</pre>", escape(text.trim_end()));
    }

    /// A table: a header row, then `rows` (cells that read as numbers right-aligned).
    pub fn table(&mut self, head: &[&str], rows: &[Vec<String>]) {
        self.body.push_str("<table>\n<tr>");
        for cell in head {
            let _ = write!(self.body, "<th>{}</th>", escape(cell));
        }
        self.body.push_str("</tr>\n");
        for row in rows {
            self.body.push_str("<tr>");
            for cell in row {
                let class = if numeric(cell) { " class=\"n\"" } else { "" };
                let _ = write!(self.body, "<td{class}>{}</td>", escape(cell));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</table>\n");
    }

    /// The Markdown of `imp sim --markdown`: tables (`| a | b |` rows, the header
    /// ended by a `|---|` row) and paragraphs, with `` `code` `` spans.
    pub fn markdown(&mut self, text: &str) {
        let mut paragraph: Vec<&str> = Vec::new();
        let mut table: Vec<Vec<String>> = Vec::new();
        let mut head_rows = 0;
        for line in text.lines().chain([""]) {
            let line = line.trim();
            if line.starts_with('|') {
                self.flush_paragraph(&mut paragraph);
                let cells: Vec<String> = line
                    .trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_string())
                    .collect();
                if cells
                    .iter()
                    .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':'))
                {
                    head_rows = table.len();
                } else {
                    table.push(cells);
                }
                continue;
            }
            self.flush_table(&mut table, &mut head_rows);
            if line.is_empty() {
                self.flush_paragraph(&mut paragraph);
            } else {
                paragraph.push(line);
            }
        }
    }

    fn flush_paragraph(&mut self, lines: &mut Vec<&str>) {
        if !lines.is_empty() {
            let _ = writeln!(self.body, "<p>{}</p>", inline(&lines.join(" ")));
            lines.clear();
        }
    }

    fn flush_table(&mut self, rows: &mut Vec<Vec<String>>, head_rows: &mut usize) {
        if rows.is_empty() {
            return;
        }
        self.body.push_str("<table>\n");
        for (i, row) in rows.iter().enumerate() {
            let tag = if i < *head_rows { "th" } else { "td" };
            self.body.push_str("<tr>");
            for cell in row {
                let class = if tag == "td" && numeric(cell) {
                    " class=\"n\""
                } else {
                    ""
                };
                let _ = write!(self.body, "<{tag}{class}>{}</{tag}>", inline(cell));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</table>\n");
        rows.clear();
        *head_rows = 0;
    }

    /// The plot in `path` (`.svg` or `.png`), embedded, captioned with its file name.
    pub fn plot(&mut self, path: &Path) -> Result<(), String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mime = match path.extension().and_then(|e| e.to_str()) {
            Some("svg") => "image/svg+xml",
            Some("png") => "image/png",
            _ => return Err(format!("{}: not an SVG or PNG plot", path.display())),
        };
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let _ = writeln!(
            self.body,
            "<figure><img class=\"plot\" alt=\"{name}\" src=\"data:{mime};base64,{data}\">\
             <figcaption>{name}</figcaption></figure>",
            name = escape(&name),
            data = base64(&bytes)
        );
        self.plots += 1;
        Ok(())
    }

    /// Links to `files` (names relative to the page's directory), one list.
    pub fn links(&mut self, files: &[String]) {
        if files.is_empty() {
            return;
        }
        self.body.push_str("<ul>\n");
        for file in files {
            let _ = writeln!(
                self.body,
                "<li><a href=\"{}\">{}</a></li>",
                escape(&percent_path(file)),
                escape(file)
            );
        }
        self.body.push_str("</ul>\n");
    }

    /// The whole document.
    pub fn finish(self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{title}</title>\n<style>{STYLE}</style>\n<script>{SCRIPT}</script>\n\
             </head>\n<body data-plots=\"{plots}\">\n{body}</body>\n</html>\n",
            title = escape(&self.title),
            plots = self.plots,
            body = self.body
        )
    }
}

/// A relative file name as a URL path: every byte but unreserved ones percent-encoded,
/// so `#`, `?` or `:` in a name cannot make it a fragment, a query or a scheme.
fn percent_path(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_everywhere() {
        let evil = "<script>alert('x')</script> & \"q\"";
        let mut page = Page::new(evil);
        page.paragraphs(evil);
        page.preformatted(evil);
        page.table(&[evil], &[vec![evil.to_string()]]);
        page.markdown(&format!("| {evil} |\n|---|\n| `{evil}` |\n\n{evil}\n"));
        page.links(&[evil.to_string()]);
        let html = page.finish();
        // The page's own script is the only one.
        assert_eq!(html.matches("<script>").count(), 1, "{html}");
        assert!(!html.contains("alert('x')"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;")
        );
        assert!(
            html.contains("href=\"%3Cscript%3Ealert%28%27x%27%29"),
            "{html}"
        );
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded, "{plain:?}");
        }
    }

    #[test]
    fn shell_words_read_back_as_given() {
        let words = [
            "imp",
            "sim",
            "my file.toml",
            "--set",
            "flow[a'b].bytes=1M",
            "",
        ];
        let line = shell_words(&words.map(String::from));
        assert_eq!(
            line,
            "imp sim 'my file.toml' --set 'flow[a'\\''b].bytes=1M' ''"
        );
    }

    #[test]
    fn markdown_tables_get_a_header_and_paragraphs_join() {
        let mut page = Page::new("t");
        page.markdown("| a | b |\n|---|---|\n| x `y` | 1.5 |\n\nsome\ntext `z`\n");
        let html = page.finish();
        assert!(html.contains("<tr><th>a</th><th>b</th></tr>"), "{html}");
        assert!(
            html.contains("<td>x <code>y</code></td><td class=\"n\">1.5</td>"),
            "{html}"
        );
        assert!(html.contains("<p>some text <code>z</code></p>"), "{html}");
    }

    #[test]
    fn plots_are_embedded_and_counted() {
        let dir = std::env::temp_dir().join(format!("imp-html-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let svg = dir.join("a<b>.svg");
        std::fs::write(&svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"/>").unwrap();
        let png = dir.join("c.png");
        std::fs::write(&png, [0x89, b'P', b'N', b'G']).unwrap();
        let mut page = Page::new("plots");
        page.plot(&svg).unwrap();
        page.plot(&png).unwrap();
        assert!(page.plot(&dir.join("d.txt")).is_err());
        let html = page.finish();
        assert!(html.contains("data-plots=\"2\""), "{html}");
        let coded = base64(b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>");
        assert!(html.contains(&format!("src=\"data:image/svg+xml;base64,{coded}\"")));
        assert!(
            html.contains("src=\"data:image/png;base64,iVBORw==\""),
            "{html}"
        );
        assert!(
            html.contains("<figcaption>a&lt;b&gt;.svg</figcaption>"),
            "{html}"
        );
        // Nothing on the page comes from elsewhere.
        assert!(
            !html.contains("http:") && !html.contains("https:"),
            "{html}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
