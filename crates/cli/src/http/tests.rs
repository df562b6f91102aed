use super::*;

use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn site() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("imp-http-test-{}-{n}", std::process::id()));
    let root = base.join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("hello.txt"), b"hello, world\n").unwrap();
    std::fs::write(root.join("index.html"), b"<h1>imp</h1>\n").unwrap();
    std::fs::write(root.join("sub/data.bin"), data()).unwrap();
    std::fs::write(base.join("secret"), b"outside").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(base.join("secret"), root.join("escape")).unwrap();
    root
}

/// The contents of `sub/data.bin`: 300,000 bytes that differ from one offset to the next.
fn data() -> Vec<u8> {
    (0..300_000u32).map(|i| (i * 7 + i / 256) as u8).collect()
}

/// Serve `requests` on one in-memory connection, returning everything written back.
fn exchange(requests: &str) -> Vec<u8> {
    let root = site();
    let site = Arc::new(Site::new(&root).unwrap());
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let out = tokio.block_on(async {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(serve_connection(server, site));
        client.write_all(requests.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        let _ = served.await;
        out
    });
    let _ = std::fs::remove_dir_all(root.parent().unwrap());
    out
}

/// One response, parsed.
#[derive(Debug)]
struct Reply {
    status: u16,
    /// Header names lower-cased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        let found = self.headers.iter().find(|(n, _)| n == name);
        found.map(|(_, v)| v.as_str())
    }
}

/// Split `raw` into responses; `head_only[i]` says the i-th answered a HEAD (no body
/// whatever its Content-Length).
fn replies(mut raw: &[u8], head_only: &[bool]) -> Vec<Reply> {
    let mut out = Vec::new();
    while !raw.is_empty() {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head");
        let head = std::str::from_utf8(&raw[..end]).unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap()[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|l| l.split_once(':').unwrap())
            .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let mut reply = Reply {
            status,
            headers,
            body: Vec::new(),
        };
        let len: usize = reply
            .header("content-length")
            .map_or(0, |v| v.parse().unwrap());
        let len = if head_only.get(out.len()) == Some(&true) {
            0
        } else {
            len
        };
        reply.body = raw[end + 4..end + 4 + len].to_vec();
        raw = &raw[end + 4 + len..];
        out.push(reply);
    }
    out
}

fn statuses(replies: &[Reply]) -> Vec<u16> {
    replies.iter().map(|r| r.status).collect()
}

#[test]
fn get_and_head_with_keep_alive_are_byte_exact() {
    let out = exchange(
        "GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n\
         HEAD /sub/data.bin HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /sub/data.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n\
         GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let r = replies(&out, &[false, true, false]);
    assert_eq!(statuses(&r), [200, 200, 200]);
    assert_eq!(r[0].body, b"hello, world\n");
    assert_eq!(r[0].header("content-type"), Some("text/plain"));
    assert_eq!(r[0].header("server"), Some("imp"));
    assert_eq!(r[1].header("content-length"), Some("300000"));
    assert!(r[1].body.is_empty());
    assert_eq!(r[2].body, data());
    assert_eq!(r[2].header("connection"), Some("close"));
}

#[test]
fn the_index_is_served_for_a_directory() {
    let out = exchange("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let r = replies(&out, &[]);
    assert_eq!(statuses(&r), [200]);
    assert_eq!(r[0].body, b"<h1>imp</h1>\n");
    assert!(
        r[0].header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
}

#[test]
fn ranges_are_served_as_partial_content() {
    let out = exchange(
        "GET /sub/data.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-1999\r\n\r\n\
         GET /sub/data.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=-10\r\n\r\n\
         GET /hello.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=50-60\r\nConnection: close\r\n\r\n",
    );
    let r = replies(&out, &[]);
    assert_eq!(statuses(&r), [206, 206, 416]);
    assert_eq!(r[0].header("content-range"), Some("bytes 1000-1999/300000"));
    assert_eq!(r[0].body, data()[1000..2000]);
    assert_eq!(r[1].body, data()[300_000 - 10..]);
    assert_eq!(r[2].header("content-range"), Some("bytes */13"));
}

#[test]
fn unmodified_files_are_304() {
    let out = exchange(
        "GET /hello.txt HTTP/1.1\r\nHost: x\r\n\
         If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n\r\n\
         GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n\r\n",
    );
    let r = replies(&out, &[]);
    assert_eq!(statuses(&r), [304, 200]);
    assert!(r[1].header("last-modified").is_some());
    assert_eq!(r[1].body, b"hello, world\n");
}

#[test]
fn missing_files_are_404_and_keep_the_connection() {
    let out = exchange(
        "GET /nope HTTP/1.1\r\nHost: x\r\n\r\nHEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(statuses(&replies(&out, &[false, true])), [404, 404, 200]);
}

#[test]
fn nothing_outside_the_root_is_served() {
    for target in [
        "/../secret",
        "/sub/../../secret",
        "/sub/%2e%2e/%2e%2e/secret",
        "/sub%2f..%2f..%2fsecret",
        "/escape",
        "/..%5csecret",
    ] {
        let out = exchange(&format!(
            "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ));
        let r = replies(&out, &[]);
        assert!((400..500).contains(&r[0].status), "{target}: {r:?}");
        assert!(!r[0].body.windows(7).any(|w| w == b"outside"), "{target}");
    }
}

#[test]
fn other_methods_are_405() {
    let out = exchange(
        "POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde\
         GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let r = replies(&out, &[]);
    assert_eq!(statuses(&r), [405, 200]);
    assert_eq!(r[0].header("allow"), Some("GET,HEAD"));
}

#[test]
fn malformed_requests_are_400() {
    for bad in [
        "GARBAGE\r\n\r\n",
        "GET /hello.txt HTTP/9.9\r\nHost: x\r\n\r\n",
        "GET /hello.txt HTTP/1.1\r\nHost x\r\n\r\n",
    ] {
        let out = exchange(bad);
        let r = replies(&out, &[]);
        assert!(
            matches!(r[0].status, 400 | 505),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out)
        );
    }
}
