//! The numeric fields of a value's derived `Debug` text (`Stats { tcp: TcpStats {
//! rx_segments: 3, .. }, .. }`) by dotted path (`tcp.rx_segments`): how `imp ss
//! --counters` lists every counter of the stack without a list of names to keep in
//! step with the structs. Lists, tuples, options and text are skipped.

/// Call `f` with each unsigned integer field of `text` (a derived `Debug` rendering)
/// and its dotted path.
pub fn numbers(text: &str, f: &mut dyn FnMut(&str, u64)) {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    parser.value("", f);
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(|b| b == b' ') {
            self.at += 1;
        }
    }

    /// An identifier or number token.
    fn word(&mut self) -> &str {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        {
            self.at += 1;
        }
        std::str::from_utf8(&self.bytes[start..self.at]).unwrap_or("")
    }

    /// Skip a bracketed group (`[..]`, `(..)`, `{..}`) or a string, whole.
    fn skip_group(&mut self) {
        let mut depth = 0usize;
        let mut quoted = false;
        while let Some(b) = self.peek() {
            self.at += 1;
            match b {
                b'\\' if quoted => self.at += 1,
                b'"' => quoted = !quoted,
                b'[' | b'(' | b'{' if !quoted => depth += 1,
                b']' | b')' | b'}' if !quoted => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth == 0 && !quoted {
                return;
            }
        }
    }

    /// One value at `path`.
    fn value(&mut self, path: &str, f: &mut dyn FnMut(&str, u64)) {
        self.skip_spaces();
        match self.peek() {
            Some(b'[' | b'(' | b'{' | b'"') => return self.skip_group(),
            None => return,
            _ => {}
        }
        let word = self.word().to_string();
        self.skip_spaces();
        match self.peek() {
            Some(b'{') => self.fields(path, f),
            Some(b'(') => self.skip_group(),
            _ => {
                if let Ok(n) = word.parse::<u64>() {
                    f(path, n);
                }
            }
        }
    }

    /// `{ name: value, ... }`, the opening brace next.
    fn fields(&mut self, path: &str, f: &mut dyn FnMut(&str, u64)) {
        self.at += 1;
        loop {
            self.skip_spaces();
            match self.peek() {
                Some(b'}') => {
                    self.at += 1;
                    return;
                }
                Some(b',') => self.at += 1,
                Some(b'.') => self.at += 2, // `..` of a non-exhaustive rendering
                None => return,
                _ => {
                    let name = self.word().to_string();
                    if name.is_empty() || self.peek() != Some(b':') {
                        // Not `name: value`: give up on this struct.
                        self.skip_to_close();
                        return;
                    }
                    self.at += 1;
                    let child = if path.is_empty() {
                        name
                    } else {
                        format!("{path}.{name}")
                    };
                    self.value(&child, f);
                }
            }
        }
    }

    /// Skip to just past the `}` closing the current struct.
    fn skip_to_close(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b'}' => {
                    self.at += 1;
                    return;
                }
                b'[' | b'(' | b'{' | b'"' => self.skip_group(),
                _ => self.at += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::numbers;

    #[derive(Debug)]
    #[allow(dead_code)] // read only through Debug
    struct Inner {
        rx: u64,
        tx: u32,
    }

    #[derive(Debug)]
    #[allow(dead_code)] // read only through Debug
    struct Outer {
        link: Inner,
        list: [u64; 2],
        maybe: Option<u64>,
        name: &'static str,
        last: u64,
    }

    #[test]
    fn nested_fields_get_dotted_names_and_the_rest_is_skipped() {
        let value = Outer {
            link: Inner { rx: 3, tx: 4 },
            list: [7, 8],
            maybe: Some(9),
            name: "a, b: {c}",
            last: 5,
        };
        let mut got = Vec::new();
        numbers(&format!("{value:?}"), &mut |name, n| {
            got.push((name.to_string(), n))
        });
        let want = [("link.rx", 3), ("link.tx", 4), ("last", 5)];
        let want: Vec<_> = want.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_stacks_counters_are_found() {
        let stack = impnet::core::Stack::new(
            impnet::core::StackConfig::default(),
            impnet::core::Secret::from_bytes([1; 16]),
        );
        let mut names = Vec::new();
        numbers(&format!("{:?}", stack.stats()), &mut |name, _| {
            names.push(name.to_string())
        });
        assert!(names.iter().any(|n| n == "tcp.rx_segments"), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("udp.")), "{names:?}");
        assert!(names.len() > 40, "{}", names.len());
    }
}
