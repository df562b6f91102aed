//! The same workloads on the Linux kernel: std::net over 127.0.0.1 (or `::1` for the
//! `-v6` rows), a client thread and a server thread.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;

use super::{Sample, Stopwatch, bulk_samples, pattern};

/// A listener on the loopback address of the family asked for.
fn listener(v6: bool) -> Result<(TcpListener, std::net::SocketAddr), String> {
    let at = if v6 { "[::1]:0" } else { "127.0.0.1:0" };
    let l = TcpListener::bind(at).map_err(|e| format!("bind {at}: {e}"))?;
    let addr = l.local_addr().map_err(|e| e.to_string())?;
    Ok((l, addr))
}

/// W1 over loopback (the kernel's loopback has one setting: MTU 65536, checksums
/// offloaded).
pub(crate) fn bulk(workload: &str, total: u64, v6: bool) -> Result<Vec<Sample>, String> {
    let (l, addr) = listener(v6)?;
    let watch = Stopwatch::start();
    let server = thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = l.accept()?;
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0u64;
        while got < total {
            match s.read(&mut buf)? {
                0 => break,
                n => got += n as u64,
            }
        }
        Ok(got)
    });
    let mut c = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let chunk = pattern(256 * 1024);
    let mut sent = 0u64;
    while sent < total {
        let n = (total - sent).min(chunk.len() as u64) as usize;
        c.write_all(&chunk[..n])
            .map_err(|e| format!("write: {e}"))?;
        sent += n as u64;
    }
    let got = server
        .join()
        .map_err(|_| "server thread panicked".to_string())?
        .map_err(|e| format!("read: {e}"))?;
    let times = watch.stop();
    if got != total {
        return Err(format!("received {got} of {total} bytes"));
    }
    Ok(bulk_samples(workload, total, times, None))
}

/// W2 over loopback (row `name`).
pub(crate) fn ping_pong(name: &str, rounds: u64, v6: bool) -> Result<Vec<Sample>, String> {
    let (l, addr) = listener(v6)?;
    let server = thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = l.accept()?;
        s.set_nodelay(true)?;
        let mut byte = [0u8; 1];
        loop {
            if s.read(&mut byte)? == 0 {
                return Ok(());
            }
            s.write_all(&byte)?;
        }
    });
    let mut c = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    c.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut byte = [0u8; 1];
    let watch = Stopwatch::start();
    for _ in 0..rounds {
        c.write_all(b"q").map_err(|e| format!("write: {e}"))?;
        c.read_exact(&mut byte).map_err(|e| format!("read: {e}"))?;
    }
    let (wall, _) = watch.stop();
    drop(c);
    let _ = server.join();
    Ok(vec![Sample::new(
        name,
        "round trips/s",
        rounds as f64 / wall,
    )])
}

/// W3 over loopback: the server reads the byte and closes first (keeping TIME-WAIT),
/// the client reads EOF and closes (row `name`).
pub(crate) fn churn(name: &str, count: u64, v6: bool) -> Result<Vec<Sample>, String> {
    let (l, addr) = listener(v6)?;
    let server = thread::spawn(move || -> std::io::Result<()> {
        let mut byte = [0u8; 1];
        for _ in 0..count {
            let (mut s, _) = l.accept()?;
            s.read_exact(&mut byte)?;
            drop(s);
        }
        Ok(())
    });
    let mut byte = [0u8; 1];
    let watch = Stopwatch::start();
    for _ in 0..count {
        let mut c = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        c.set_nodelay(true).map_err(|e| e.to_string())?;
        c.write_all(b"x").map_err(|e| format!("write: {e}"))?;
        let n = c.read(&mut byte).map_err(|e| format!("read: {e}"))?;
        if n != 0 {
            return Err("expected EOF".into());
        }
        let _ = c.shutdown(Shutdown::Both);
    }
    let (wall, _) = watch.stop();
    server
        .join()
        .map_err(|_| "server thread panicked".to_string())?
        .map_err(|e| format!("server: {e}"))?;
    Ok(vec![Sample::new(
        name,
        "connections/s",
        count as f64 / wall,
    )])
}

/// W4 over loopback, for the counts the file-descriptor limit allows (two per
/// connection): round trips spread over n open connections, per packet of payload
/// (two per round trip; the kernel's ACKs ride on the data).
pub(crate) fn scale(counts: &[usize], rounds: u64) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    for &n in counts.iter().filter(|&&n| n <= 4096) {
        let (l, addr) = listener(false)?;
        let server = thread::spawn(move || -> std::io::Result<()> {
            let mut streams = Vec::with_capacity(n);
            for _ in 0..n {
                let (s, _) = l.accept()?;
                s.set_nodelay(true)?;
                streams.push(s);
            }
            let mut byte = [0u8; 1];
            // Serve in the order the client uses them.
            let stride = super::workload::scale_stride(n);
            let mut at = 0usize;
            loop {
                if streams[at].read(&mut byte)? == 0 {
                    return Ok(());
                }
                streams[at].write_all(&byte)?;
                at = (at + stride) % n;
            }
        });
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            let c = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
            c.set_nodelay(true).map_err(|e| e.to_string())?;
            conns.push(c);
        }
        let stride = super::workload::scale_stride(n);
        let mut at = 0usize;
        let mut byte = [0u8; 1];
        let watch = Stopwatch::start();
        for _ in 0..rounds {
            conns[at]
                .write_all(b"q")
                .map_err(|e| format!("write: {e}"))?;
            conns[at]
                .read_exact(&mut byte)
                .map_err(|e| format!("read: {e}"))?;
            at = (at + stride) % n;
        }
        let (wall, _) = watch.stop();
        // Closing the connection the server waits on ends it.
        drop(conns);
        let _ = server.join();
        let label = match n {
            n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("W4-{}M", n / 1_000_000),
            n if n >= 1000 && n % 1000 == 0 => format!("W4-{}k", n / 1000),
            n => format!("W4-{n}"),
        };
        samples.push(Sample::new(
            label,
            "ns/packet",
            wall * 1e9 / (2 * rounds) as f64,
        ));
    }
    Ok(samples)
}
