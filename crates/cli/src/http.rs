//! The HTTP/1.1 file server of `imp serve --http DIR`: GET and HEAD of the files under
//! DIR, with Content-Length and keep-alive (RFC 9112), 400 for malformed requests, 404
//! for what is not there, 405 for other methods. Never serves a file outside DIR: `..`
//! segments are refused and the resolved path (symbolic links followed) must lie
//! inside DIR.
//!
//! Generic over `Read + Write`, so it serves an imp `TcpStream` and is tested on memory.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The longest request head (request line and headers) we read.
const MAX_HEAD: usize = 16 * 1024;

/// Bytes per write of a file body.
const BODY_CHUNK: usize = 256 * 1024;

/// A request head, parsed.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    method: String,
    target: String,
    /// The connection stays open after the response.
    keep_alive: bool,
    /// Bytes of request body to skip (Content-Length).
    body_len: u64,
}

/// Why a request cannot be answered normally: the status to send (and then close).
#[derive(Debug, PartialEq, Eq)]
struct BadRequest(&'static str);

/// Serve requests on `stream` until the peer closes, an error, or a response that
/// closes the connection. Returns the number of responses sent.
pub fn serve_connection<S: Read + Write>(mut stream: S, root: &Path) -> io::Result<u64> {
    let mut buffered: Vec<u8> = Vec::new();
    let mut responses = 0;
    loop {
        let Some(head) = read_head(&mut stream, &mut buffered)? else {
            return Ok(responses);
        };
        let request = match parse_head(&head) {
            Ok(request) => request,
            Err(BadRequest(why)) => {
                respond_error(&mut stream, "400 Bad Request", why, false, false)?;
                return Ok(responses + 1);
            }
        };
        skip_body(&mut stream, &mut buffered, request.body_len)?;
        responses += 1;
        if !respond(&mut stream, &request, root)? || !request.keep_alive {
            return Ok(responses);
        }
    }
}

/// Read up to the blank line ending a request head; `None` if the peer closed before
/// sending anything. Bytes after the head stay in `buffered` (pipelined requests).
fn read_head<S: Read>(stream: &mut S, buffered: &mut Vec<u8>) -> io::Result<Option<Vec<u8>>> {
    let mut chunk = [0u8; 4096];
    loop {
        // RFC 9112 §2.2: "a server that is expecting to receive and parse a
        // request-line SHOULD ignore at least one empty line (CRLF) received prior to
        // the request-line."
        while buffered.starts_with(b"\r\n") {
            buffered.drain(..2);
        }
        if let Some(end) = find(buffered, b"\r\n\r\n") {
            let rest = buffered.split_off(end + 4);
            let head = std::mem::replace(buffered, rest);
            return Ok(Some(head));
        }
        if buffered.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            if buffered.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "request cut short",
            ));
        }
        buffered.extend_from_slice(&chunk[..n]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse_head(head: &[u8]) -> Result<Request, BadRequest> {
    let text = std::str::from_utf8(head).map_err(|_| BadRequest("request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest("malformed request line"));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(BadRequest("malformed method"));
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(BadRequest("unsupported HTTP version")),
    };
    let mut host = false;
    let mut connection = String::new();
    let mut body_len = 0;
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(BadRequest("malformed header line"));
        };
        // RFC 9112 §5.1: "No whitespace is allowed between the field name and colon."
        if name.is_empty() || name.ends_with([' ', '\t']) {
            return Err(BadRequest("malformed header name"));
        }
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "host" => host = true,
            "connection" => connection = value.to_ascii_lowercase(),
            "content-length" => {
                body_len = value
                    .parse()
                    .map_err(|_| BadRequest("bad Content-Length"))?;
            }
            "transfer-encoding" => {
                return Err(BadRequest(
                    "request bodies with Transfer-Encoding are not accepted",
                ));
            }
            _ => {}
        }
    }
    // RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
    // HTTP/1.1 request message that lacks a Host header field".
    if http11 && !host {
        return Err(BadRequest("HTTP/1.1 request without Host"));
    }
    let keep_alive = if http11 {
        !connection.split(',').any(|t| t.trim() == "close")
    } else {
        connection.split(',').any(|t| t.trim() == "keep-alive")
    };
    Ok(Request {
        method: method.to_string(),
        target: target.to_string(),
        keep_alive,
        body_len,
    })
}

fn skip_body<S: Read>(stream: &mut S, buffered: &mut Vec<u8>, len: u64) -> io::Result<()> {
    let from_buffer = (len.min(buffered.len() as u64)) as usize;
    buffered.drain(..from_buffer);
    let rest = len - from_buffer as u64;
    let copied = io::copy(&mut stream.take(rest), &mut io::sink())?;
    if copied < rest {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "request body cut short",
        ));
    }
    Ok(())
}

/// Answer one request; false if the connection must close afterwards.
fn respond<S: Write>(stream: &mut S, request: &Request, root: &Path) -> io::Result<bool> {
    let head_only = request.method == "HEAD";
    let keep = request.keep_alive;
    if request.method != "GET" && !head_only {
        let body = "only GET and HEAD are served\n";
        let head = format!(
            "HTTP/1.1 405 Method Not Allowed\r\nServer: imp\r\nAllow: GET, HEAD\r\n\
             Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
            body.len(),
            connection(keep)
        );
        stream.write_all(head.as_bytes())?;
        stream.write_all(body.as_bytes())?;
        return Ok(keep);
    }
    let relative = match request_path(&request.target) {
        Ok(path) => path,
        Err(BadRequest(why)) => {
            respond_error(stream, "400 Bad Request", why, head_only, false)?;
            return Ok(false);
        }
    };
    match resolve(root, &relative) {
        Some(Resolved::File(path)) => send_file(stream, &path, head_only, keep),
        Some(Resolved::Directory(path)) => {
            if !request
                .target
                .split('?')
                .next()
                .unwrap_or("")
                .ends_with('/')
            {
                let location = format!("{}/", request.target.split('?').next().unwrap_or("/"));
                let head = format!(
                    "HTTP/1.1 301 Moved Permanently\r\nServer: imp\r\nLocation: {location}\r\n\
                     Content-Length: 0\r\nConnection: {}\r\n\r\n",
                    connection(keep)
                );
                stream.write_all(head.as_bytes())?;
                return Ok(keep);
            }
            let body = listing(&path, &relative)?;
            let head = format!(
                "HTTP/1.1 200 OK\r\nServer: imp\r\nContent-Type: text/html; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: {}\r\n\r\n",
                body.len(),
                connection(keep)
            );
            stream.write_all(head.as_bytes())?;
            if !head_only {
                stream.write_all(body.as_bytes())?;
            }
            Ok(keep)
        }
        None => {
            respond_error(stream, "404 Not Found", "no such file", head_only, keep)?;
            Ok(keep)
        }
    }
}

fn connection(keep: bool) -> &'static str {
    if keep { "keep-alive" } else { "close" }
}

fn respond_error<S: Write>(
    stream: &mut S,
    status: &str,
    why: &str,
    head_only: bool,
    keep: bool,
) -> io::Result<()> {
    let body = format!("{status}: {why}\n");
    let head = format!(
        "HTTP/1.1 {status}\r\nServer: imp\r\nContent-Type: text/plain\r\n\
         Content-Length: {}\r\nConnection: {}\r\n\r\n",
        body.len(),
        connection(keep)
    );
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body.as_bytes())?;
    }
    Ok(())
}

/// The request target's path, percent-decoded and split into segments; `..`, NUL and
/// backslashes are refused, `.` and empty segments dropped.
fn request_path(target: &str) -> Result<PathBuf, BadRequest> {
    // Absolute form (RFC 9112 §3.2.2): keep the path only.
    let target = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    if !target.starts_with('/') {
        return Err(BadRequest("request target must start with /"));
    }
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let mut out = PathBuf::new();
    for raw in path.split('/') {
        let segment = percent_decode(raw)?;
        if segment.contains(['\0', '\\', '/']) {
            return Err(BadRequest("bad character in path"));
        }
        match segment.as_str() {
            "" | "." => {}
            ".." => return Err(BadRequest("`..` is not allowed in paths")),
            s => out.push(s),
        }
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Result<String, BadRequest> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or(BadRequest("bad percent-encoding in path"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| BadRequest("path is not UTF-8"))
}

enum Resolved {
    File(PathBuf),
    Directory(PathBuf),
}

/// `relative` under `root`, if it exists and (links followed) stays inside `root`.
fn resolve(root: &Path, relative: &Path) -> Option<Resolved> {
    let root = root.canonicalize().ok()?;
    let path = root.join(relative).canonicalize().ok()?;
    if !path.starts_with(&root) {
        return None;
    }
    let meta = std::fs::metadata(&path).ok()?;
    if meta.is_dir() {
        let index = path.join("index.html");
        if index.is_file() {
            return Some(Resolved::File(index));
        }
        return Some(Resolved::Directory(path));
    }
    meta.is_file().then_some(Resolved::File(path))
}

fn send_file<S: Write>(
    stream: &mut S,
    path: &Path,
    head_only: bool,
    keep: bool,
) -> io::Result<bool> {
    let Ok(mut file) = File::open(path) else {
        respond_error(
            stream,
            "404 Not Found",
            "cannot open the file",
            head_only,
            keep,
        )?;
        return Ok(keep);
    };
    let len = file.metadata()?.len();
    let head = format!(
        "HTTP/1.1 200 OK\r\nServer: imp\r\nContent-Type: {}\r\nContent-Length: {len}\r\n\
         Connection: {}\r\n\r\n",
        content_type(path),
        connection(keep)
    );
    stream.write_all(head.as_bytes())?;
    if head_only {
        return Ok(keep);
    }
    let mut buf = vec![0u8; BODY_CHUNK];
    let mut left = len;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            // The file shrank under us: the promised length cannot be kept.
            return Ok(false);
        }
        stream.write_all(&buf[..n])?;
        left -= n as u64;
    }
    Ok(keep)
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" | "md" => "text/plain; charset=utf-8",
        "css" => "text/css",
        "js" => "text/javascript",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "pcap" => "application/vnd.tcpdump.pcap",
        _ => "application/octet-stream",
    }
}

fn listing(dir: &Path, relative: &Path) -> io::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| {
            let mut name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            name
        })
        .collect();
    names.sort();
    let title = format!("/{}", relative.display());
    let mut body = format!("<!DOCTYPE html>\n<title>{title}</title>\n<h1>{title}</h1>\n<ul>\n");
    for name in names {
        let escaped = name
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('"', "&quot;");
        body.push_str(&format!("<li><a href=\"{escaped}\">{escaped}</a></li>\n"));
    }
    body.push_str("</ul>\n");
    Ok(body)
}

#[cfg(test)]
mod tests;
