use std::io::Cursor;

use super::*;

/// A connection in memory: the requests to read, the responses written.
struct Mem {
    input: Cursor<Vec<u8>>,
    output: Vec<u8>,
}

impl Read for Mem {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Mem {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn site() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = std::env::temp_dir().join(format!("imp-http-test-{}-{n}", std::process::id()));
    let root = base.join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("hello.txt"), b"hello, world\n").unwrap();
    std::fs::write(root.join("sub/data.bin"), vec![7u8; 300_000]).unwrap();
    std::fs::write(base.join("secret"), b"outside").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(base.join("secret"), root.join("escape")).unwrap();
    root
}

/// Serve `requests`, returning everything written back.
fn exchange(requests: &str) -> String {
    let root = site();
    let mut mem = Mem {
        input: Cursor::new(requests.as_bytes().to_vec()),
        output: Vec::new(),
    };
    serve_connection(&mut mem, &root).unwrap();
    let _ = std::fs::remove_dir_all(root.parent().unwrap());
    String::from_utf8_lossy(&mem.output).into_owned()
}

/// The status codes of the responses (not counting "HTTP/1.1" quoted in a message).
fn statuses(responses: &str) -> Vec<&str> {
    responses
        .match_indices("HTTP/1.1 ")
        .filter(|(i, _)| !responses[..*i].ends_with(": "))
        .map(|(i, _)| &responses[i + 9..i + 12])
        .collect()
}

#[test]
fn get_and_head_with_keep_alive() {
    let out = exchange(
        "GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n\
         HEAD /sub/data.bin HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /sub/data.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n\
         GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(statuses(&out), ["200", "200", "200"], "{}", &out[..300]);
    assert!(out.contains("Content-Length: 13\r\nConnection: keep-alive\r\n\r\nhello, world\n"));
    assert!(out.contains("Content-Length: 300000\r\nConnection: keep-alive\r\n\r\nHTTP/1.1"));
    assert!(out.contains("Connection: close"));
    assert_eq!(out.len() - out.rfind("\r\n\r\n").unwrap() - 4, 300_000);
}

#[test]
fn http10_closes_unless_asked_to_keep_alive() {
    let out = exchange("GET /hello.txt HTTP/1.0\r\n\r\nGET /hello.txt HTTP/1.0\r\n\r\n");
    assert_eq!(statuses(&out), ["200"]);
    let out = exchange(
        "GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /nope HTTP/1.0\r\n\r\n",
    );
    assert_eq!(statuses(&out), ["200", "404"]);
}

#[test]
fn missing_files_are_404_and_keep_the_connection() {
    let out = exchange(
        "GET /nope HTTP/1.1\r\nHost: x\r\n\r\nHEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(statuses(&out), ["404", "404", "200"]);
}

#[test]
fn malformed_requests_are_400_and_close() {
    for bad in [
        "GARBAGE\r\n\r\n",
        "GET /hello.txt HTTP/1.1\r\n\r\n",
        "GET /hello.txt HTTP/9.9\r\nHost: x\r\n\r\n",
        "GET hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /hello.txt HTTP/1.1\r\nHost x\r\n\r\n",
        "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /../secret HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /sub/%2e%2e/%2e%2e/secret HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /sub%2f..%2f..%2fsecret HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let out = exchange(&format!("{bad}GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert_eq!(statuses(&out), ["400"], "{bad:?}: {out}");
        assert!(out.contains("Connection: close"), "{out}");
    }
}

#[test]
fn nothing_outside_the_root_is_served() {
    let out = exchange("GET /escape HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(statuses(&out), ["404"], "{out}");
    assert!(!out.contains("outside"));
}

#[test]
fn other_methods_are_405_and_bodies_are_skipped() {
    let out = exchange(
        "POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde\
         GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(statuses(&out), ["405", "200"], "{out}");
    assert!(out.contains("Allow: GET, HEAD"));
}

#[test]
fn directories_list_or_redirect() {
    let out = exchange("GET /sub HTTP/1.1\r\nHost: x\r\n\r\nGET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(statuses(&out), ["301", "200"], "{out}");
    assert!(out.contains("Location: /sub/\r\n"));
    assert!(out.contains("<a href=\"data.bin\">"));
}

#[test]
fn absolute_form_and_query_are_understood() {
    let out = exchange("GET http://example/hello.txt?x=1 HTTP/1.1\r\nHost: example\r\n\r\n");
    assert_eq!(statuses(&out), ["200"]);
}
