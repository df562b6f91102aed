//! Replies (RFC 959 §4.2): a three-digit code and text, on one line (`226 Done`) or
//! several (`211-Features:` ... `211 End`), each line ending in CRLF; and
//! [`ReplyParser`], which takes them back out of a byte stream for the client.

use std::fmt;

/// One reply: its code and its lines of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The three-digit code (100..=599).
    pub code: u16,
    /// The text, one entry per line (at least one).
    pub lines: Vec<String>,
}

impl Reply {
    /// A one-line reply.
    pub fn new(code: u16, text: impl Into<String>) -> Reply {
        Reply {
            code,
            lines: vec![text.into()],
        }
    }

    /// A reply of several lines (the first and last carry the code).
    pub fn multi(code: u16, lines: Vec<String>) -> Reply {
        Reply { code, lines }
    }

    /// The first line's text.
    pub fn text(&self) -> &str {
        self.lines.first().map_or("", String::as_str)
    }

    /// 1yz: positive preliminary (a data transfer starts).
    pub fn is_preliminary(&self) -> bool {
        (100..200).contains(&self.code)
    }

    /// 2yz: positive completion.
    pub fn is_completion(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// 3yz: positive intermediate (more is needed, e.g. PASS after USER).
    pub fn is_intermediate(&self) -> bool {
        (300..400).contains(&self.code)
    }

    /// The reply as it goes on the wire.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_string().into_bytes()
    }
}

impl fmt::Display for Reply {
    /// RFC 959 §4.2: `CODE-first line`, the middle lines (indented by a space, so none
    /// can pass for the last), `CODE last line`; a single line is `CODE text`. Line
    /// breaks inside the text are not sent (CR and LF become spaces).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clean = |s: &str| s.replace(['\r', '\n'], " ");
        match self.lines.as_slice() {
            [] => write!(f, "{} \r\n", self.code),
            [one] => write!(f, "{} {}\r\n", self.code, clean(one)),
            [first, middle @ .., last] => {
                write!(f, "{}-{}\r\n", self.code, clean(first))?;
                for line in middle {
                    write!(f, " {}\r\n", clean(line))?;
                }
                write!(f, "{} {}\r\n", self.code, clean(last))
            }
        }
    }
}

/// What went wrong reading a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// A reply's first line does not start with three digits and a space or a dash.
    Malformed(String),
    /// A line longer than [`MAX_LINE`].
    TooLong,
    /// A multi-line reply longer than [`MAX_LINES`] lines.
    TooManyLines,
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyError::Malformed(line) => write!(f, "not an FTP reply: {line:?}"),
            ReplyError::TooLong => write!(f, "a reply line longer than {MAX_LINE} bytes"),
            ReplyError::TooManyLines => write!(f, "a reply of more than {MAX_LINES} lines"),
        }
    }
}

impl std::error::Error for ReplyError {}

/// The longest line either side accepts (commands and replies).
pub const MAX_LINE: usize = 4096;
/// The most lines a multi-line reply may have.
pub const MAX_LINES: usize = 1024;

/// Takes replies out of the control connection's byte stream.
#[derive(Debug, Default)]
pub struct ReplyParser {
    /// Bytes of a line not yet ended.
    partial: Vec<u8>,
    /// A multi-line reply under way: its code and lines so far.
    open: Option<(u16, Vec<String>)>,
}

impl ReplyParser {
    /// A parser at the start of a stream.
    pub fn new() -> ReplyParser {
        ReplyParser::default()
    }

    /// Feeds bytes; returns the replies they complete, in order.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<Reply>, ReplyError> {
        let mut out = Vec::new();
        for &b in data {
            if b != b'\n' {
                if self.partial.len() >= MAX_LINE {
                    return Err(ReplyError::TooLong);
                }
                self.partial.push(b);
                continue;
            }
            let mut line = std::mem::take(&mut self.partial);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if let Some(reply) = self.line(line)? {
                out.push(reply);
            }
        }
        Ok(out)
    }

    fn line(&mut self, line: String) -> Result<Option<Reply>, ReplyError> {
        let head = parse_head(&line);
        match (self.open.take(), head) {
            (None, Some((code, b' '))) => Ok(Some(Reply::new(code, line.get(4..).unwrap_or("")))),
            (None, Some((code, _))) => {
                self.open = Some((code, vec![line.get(4..).unwrap_or("").to_string()]));
                Ok(None)
            }
            (None, None) => Err(ReplyError::Malformed(line)),
            (Some((code, mut lines)), head) => {
                if lines.len() >= MAX_LINES {
                    return Err(ReplyError::TooManyLines);
                }
                // RFC 959 §4.2: the last line starts with the same code and a space.
                if head == Some((code, b' ')) {
                    lines.push(line.get(4..).unwrap_or("").to_string());
                    return Ok(Some(Reply::multi(code, lines)));
                }
                lines.push(line.strip_prefix(' ').unwrap_or(&line).to_string());
                self.open = Some((code, lines));
                Ok(None)
            }
        }
    }
}

/// `NNN ` or `NNN-` at the start of `line`: the code and the separator.
fn parse_head(line: &str) -> Option<(u16, u8)> {
    let b = line.as_bytes();
    if b.len() < 3 || !b[..3].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let sep = *b.get(3).unwrap_or(&b' ');
    if sep != b' ' && sep != b'-' {
        return None;
    }
    let code = line[..3].parse().ok()?;
    (100..600).contains(&code).then_some((code, sep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_format_and_parse_back() {
        let one = Reply::new(226, "Transfer complete");
        assert_eq!(one.to_string(), "226 Transfer complete\r\n");
        let many = Reply::multi(
            211,
            vec![
                "Features:".into(),
                "SIZE".into(),
                "211 End".into(),
                "End".into(),
            ],
        );
        assert_eq!(
            many.to_string(),
            "211-Features:\r\n SIZE\r\n 211 End\r\n211 End\r\n"
        );
        let mut p = ReplyParser::new();
        let mut wire = many.to_bytes();
        wire.extend(one.to_bytes());
        let (a, b) = wire.split_at(7);
        let mut got = p.push(a).unwrap();
        got.extend(p.push(b).unwrap());
        assert_eq!(got, vec![many, one]);
    }

    #[test]
    fn bad_replies_are_errors() {
        let mut p = ReplyParser::new();
        assert!(matches!(
            p.push(b"hello\r\n"),
            Err(ReplyError::Malformed(_))
        ));
        let mut p = ReplyParser::new();
        assert_eq!(
            p.push(b"700 x\r\n"),
            Err(ReplyError::Malformed("700 x".into()))
        );
        let mut p = ReplyParser::new();
        assert_eq!(p.push(&[b'2'; MAX_LINE + 1]), Err(ReplyError::TooLong));
        let mut p = ReplyParser::new();
        assert_eq!(p.push(b"220\n").unwrap(), vec![Reply::new(220, "")]);
    }
}
