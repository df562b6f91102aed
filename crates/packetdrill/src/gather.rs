//! Gather lists (`&[&[u8]]`, a `writev`'s buffers): their first bytes, and the rest.

/// The first `n` bytes of `bufs`.
pub(crate) fn take<'a>(bufs: &[&'a [u8]], mut n: usize) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    for buf in bufs {
        if n == 0 {
            break;
        }
        let part = &buf[..buf.len().min(n)];
        n -= part.len();
        out.push(part);
    }
    out
}

/// `bufs` without their first `n` bytes.
pub(crate) fn skip<'a>(bufs: &[&'a [u8]], mut n: usize) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    for buf in bufs {
        if n >= buf.len() {
            n -= buf.len();
        } else {
            out.push(&buf[n..]);
            n = 0;
        }
    }
    out
}
