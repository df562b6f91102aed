//! The applications at both ends of each flow: a ttcp-style bulk sender and sink (with
//! an optional FTP text-mode translation and a CPU cost per byte), a request/response
//! client and server, and ping.

use impnet_core::tcp::{TcpError, TcpHandle};
use impnet_core::{Duration, IcmpError, Instant, Stack};

use super::{App, AppState, BulkApp, RrApp, Step, tcp_err};
use crate::HostId;
use crate::Sim;
use crate::scenario::{FlowKind, ResponseWrite};

impl App {
    pub(super) fn drive_bulk(&mut self, sim: &mut Sim, from: HostId, to: HostId) -> Step {
        let now = sim.now();
        let FlowKind::Bulk {
            bytes,
            record,
            text_mode,
            cpu_per_byte,
            translate_per_byte,
        } = self.spec.kind.clone()
        else {
            return Ok(());
        };
        let AppState::Bulk(s) = &mut self.state else {
            return Ok(());
        };
        let file = BulkFile {
            bytes,
            record,
            record_reads: sim.cpu_report(to).is_some(),
            text_mode,
            per_byte: if text_mode {
                cpu_per_byte + translate_per_byte
            } else {
                cpu_per_byte
            },
            lazy: !text_mode
                && cpu_per_byte == Duration::ZERO
                && sim.cpu_profile(from).is_none()
                && lazy_keeps_the_wire(
                    bytes,
                    record,
                    sim.host(from).tcp_config().send_buffer,
                    sim.host(to).tcp_config().recv_buffer,
                ),
        };
        let mut wake = bulk_send(s, sim, from, now, &file)?;
        // The receiver: read (paying CPU time per byte), check (text: translate back, hash).
        let stack = sim.host_mut(to);
        let server = match s.server {
            Some(c) => c,
            None => match stack.tcp_accept(s.listener.ok_or("no listener")?) {
                Ok(c) => *s.server.insert(c),
                Err(TcpError::WouldBlock) => {
                    self.wake = wake;
                    return Ok(());
                }
                Err(e) => return Err(tcp_err("accept", e)),
            },
        };
        if let Some(busy) = bulk_receive(s, stack, now, server, &file)? {
            wake = Some(wake.map_or(busy, |w| w.min(busy)));
        }
        if s.eof && s.closed && self.done_at.is_none() {
            self.done_at = Some(now);
        }
        self.wake = wake;
        Ok(())
    }

    pub(super) fn drive_rr(&mut self, sim: &mut Sim, from: HostId, to: HostId) -> Step {
        let now = sim.now();
        let FlowKind::RequestResponse {
            request,
            response,
            count,
            pipeline,
            write,
        } = self.spec.kind.clone()
        else {
            return Ok(());
        };
        let AppState::Rr(s) = &mut self.state else {
            return Ok(());
        };
        let client = s.client.ok_or("no connection")?;
        rr_serve(s, sim.host_mut(to), now, request, response)?;
        rr_respond(s, sim, to, now, response, write)?;
        // The client: keep `pipeline` requests outstanding, collect responses.
        let stack = sim.host_mut(from);
        loop {
            while !s.closed
                && count.is_none_or(|c| s.issued < c)
                && s.outstanding.len() < pipeline as usize
            {
                s.outstanding.push_back(now);
                s.issued += 1;
                s.client_owed += request;
            }
            // A write per request (a letter a SEND, as the 1975 exerciser), or what is
            // left of one a full send buffer cut short.
            while s.client_owed > 0 {
                let left = match s.client_owed % request {
                    0 => request,
                    part => part,
                };
                let n = left.min(s.payload.len());
                match stack.tcp_send(now, client, &s.payload[..n]) {
                    Ok(0) | Err(TcpError::WouldBlock) => break,
                    Ok(n) => s.client_owed -= n,
                    Err(e) => return Err(tcp_err("send", e)),
                }
            }
            if !rr_collect(s, stack, now, client, response)? {
                break;
            }
        }
        if !s.closed && count.is_some_and(|c| s.completed >= c) {
            stack
                .tcp_close(now, client)
                .map_err(|e| tcp_err("close", e))?;
            s.closed = true;
            self.done_at = Some(now);
        }
        Ok(())
    }

    /// A keystroke flow: the client types one byte at every `interval` from the flow's
    /// start (its latency clock starts then), the server echoes each byte at once.
    pub(super) fn drive_keystroke(&mut self, sim: &mut Sim, from: HostId, to: HostId) -> Step {
        let now = sim.now();
        let FlowKind::Keystroke { count, interval } = self.spec.kind.clone() else {
            return Ok(());
        };
        let (started, link) = (self.started.unwrap_or(now), self.link);
        let AppState::Rr(s) = &mut self.state else {
            return Ok(());
        };
        let client = s.client.ok_or("no connection")?;
        rr_serve(s, sim.host_mut(to), now, 1, 1)?;
        rr_respond(s, sim, to, now, 1, ResponseWrite::One)?;
        let typed_at = |i: u64| started + interval.saturating_mul(i);
        while !s.closed && s.issued < count && typed_at(s.issued) <= now {
            s.outstanding.push_back(typed_at(s.issued));
            s.issued += 1;
            s.client_owed += 1;
        }
        let stack = sim.host_mut(from);
        while s.client_owed > 0 {
            match stack.tcp_send(now, client, &s.payload[..s.client_owed.min(1)]) {
                Ok(0) | Err(TcpError::WouldBlock) => break,
                Ok(n) => s.client_owed -= n,
                Err(e) => return Err(tcp_err("send", e)),
            }
        }
        while rr_collect(s, stack, now, client, 1)? {}
        if s.issued < count {
            self.wake = Some(typed_at(s.issued));
        } else if !s.closed && s.completed >= count {
            stack
                .tcp_close(now, client)
                .map_err(|e| tcp_err("close", e))?;
            s.closed = true;
            self.done_at = Some(now);
        }
        s.frames = (0..2)
            .map(|side| sim.link_stats(link, side).submitted)
            .sum();
        Ok(())
    }

    pub(super) fn drive_ping(&mut self, sim: &mut Sim, from: HostId) -> Step {
        let now = sim.now();
        let FlowKind::Ping {
            count,
            interval,
            size,
        } = self.spec.kind.clone()
        else {
            return Ok(());
        };
        let AppState::Ping(p) = &mut self.state else {
            return Ok(());
        };
        let socket = p.socket.ok_or("no ICMP socket")?;
        let stack = sim.host_mut(from);
        loop {
            match stack.icmp_recv(socket, &mut p.buf) {
                Ok(echo) => {
                    if let Some(&sent) = p.sent_at.get(usize::from(echo.seq_no)) {
                        p.received += 1;
                        p.rtts_ms.push((now - sent).as_secs_f64() * 1e3);
                    }
                }
                Err(IcmpError::WouldBlock) => break,
                // Errors (unreachable) count as lost requests.
                Err(_) => {}
            }
        }
        let start = self.started.unwrap_or(now);
        let sent = p.sent_at.len() as u32;
        if sent < count {
            let next = start + interval.saturating_mul(u64::from(sent));
            if now >= next {
                let payload = vec![0xa5u8; size];
                let _ = stack.icmp_send_echo(now, socket, self.addrs.1, sent as u16, &payload);
                p.sent_at.push(now);
                self.wake = Some(now + interval);
            } else {
                self.wake = Some(next);
            }
            return Ok(());
        }
        let last = p.sent_at.last().copied().unwrap_or(now);
        let give_up = last + Duration::from_secs(3).max(interval);
        if p.received >= count || now >= give_up {
            self.done_at = Some(now);
        } else {
            self.wake = Some(give_up);
        }
        Ok(())
    }
}

/// What a bulk flow sends and what each byte costs.
struct BulkFile {
    /// File bytes to send.
    bytes: u64,
    /// Bytes per application write.
    record: usize,
    /// The receiver reads a record at a time (its host has a CPU: each read is a
    /// system call, as a 1981 ttcp's were), rather than all that is there.
    record_reads: bool,
    /// FTP ASCII mode: LF goes out as CRLF.
    text_mode: bool,
    /// CPU time per byte at each end (with the translation in text mode).
    per_byte: Duration,
    /// Write as TCP can send, not all the send buffer takes at once (`lazy_room`):
    /// binary mode with no CPU cost per byte, no CPU at the sender (whose socket
    /// calls it would price as they come), and buffers for which
    /// `lazy_keeps_the_wire`.
    lazy: bool,
}

/// The bulk sender at `from`: prepare a record (paying its CPU time), then write it;
/// close after the last. Returns when the sender is next free, if it is busy now. The
/// host is marked touched ([`Sim::host_mut`]) only by a call that may change its stack:
/// a sender with nothing to write (the receiver's turn) costs the simulator no drain.
fn bulk_send(
    s: &mut BulkApp,
    sim: &mut Sim,
    from: HostId,
    now: Instant,
    file: &BulkFile,
) -> Result<Option<Instant>, String> {
    let client = s.client.ok_or("no connection")?;
    while !s.closed {
        if s.record_left > 0 {
            if now < s.sender_busy_until {
                return Ok(Some(s.sender_busy_until));
            }
            // Binary mode: the record is made in the send buffer as TCP takes it, and
            // (with no CPU cost per byte) only as far ahead as TCP can send soon.
            let made = s.written - s.record_left as u64;
            let len = if file.lazy && !s.eager {
                match lazy_room(sim.host(from), client, made) {
                    Ok(Some(room)) => s.record_left.min(room),
                    Ok(None) => break,
                    Err(e) => return Err(tcp_err("send", e)),
                }
            } else {
                s.record_left
            };
            let (stream, sent) = (s.stream, &mut s.sent);
            let fill = |piece: &mut [u8]| {
                stream.fill(*sent, piece);
                *sent += piece.len() as u64;
            };
            match sim.host_mut(from).tcp_send_with(now, client, len, fill) {
                Ok(0) | Err(TcpError::WouldBlock) => break,
                Ok(n) => s.record_left -= n,
                Err(e) => return Err(tcp_err("send", e)),
            }
            continue;
        }
        if s.offset < s.out.len() {
            if now < s.sender_busy_until {
                return Ok(Some(s.sender_busy_until));
            }
            match sim.host_mut(from).tcp_send(now, client, &s.out[s.offset..]) {
                Ok(0) | Err(TcpError::WouldBlock) => break,
                Ok(n) => s.offset += n,
                Err(e) => return Err(tcp_err("send", e)),
            }
            continue;
        }
        if s.written >= file.bytes {
            sim.host_mut(from)
                .tcp_close(now, client)
                .map_err(|e| tcp_err("close", e))?;
            s.closed = true;
            break;
        }
        let n = (file.bytes - s.written).min(file.record as u64) as usize;
        s.written += n as u64;
        if file.text_mode {
            let mut raw = std::mem::take(&mut s.buf);
            raw.resize(raw.len().max(n), 0);
            s.text.fill(&mut raw[..n]);
            s.sent_hash.update(&raw[..n]);
            // FTP ASCII mode: the network form of a newline is CRLF (RFC 959).
            s.out.clear();
            for &b in &raw[..n] {
                if b == b'\n' {
                    s.out.push(b'\r');
                }
                s.out.push(b);
            }
            s.buf = raw;
        } else {
            // The record is made where TCP keeps it (above: no buffer, no copy
            // between). The receiver reads into `buf`, which grows to the largest
            // record as before.
            if s.buf.len() < n {
                s.buf.resize(n, 0);
            }
            s.out.clear();
            s.record_left = n;
        }
        s.offset = 0;
        s.sender_busy_until = now.max(s.sender_busy_until) + file.per_byte.saturating_mul(n as u64);
    }
    Ok(None)
}

/// What a lazy bulk sender keeps queued before the handshake is done (its first
/// flight goes from it as the SYN-ACK arrives).
const LAZY_START: u64 = 256 << 10;
/// Unsent bytes a lazy bulk sender keeps beyond what TCP can send before the sender
/// runs again, and how much more it writes at a time once below that.
const LAZY_MARGIN: usize = 64 << 10;

/// Whether the lazy bulk sender puts on the wire what filling the send buffer at once
/// does, given the file's and the record's length and the two ends' buffers. What it
/// could change is where Linux's forced push falls (PSH within a write every half of
/// the peer's largest window, counted from the start of a write longer than that or
/// back from the end of the queued data, `Conn::push_due`):
/// - with a receive buffer at least twice the send buffer and the record, the
///   peer's window once scaled is too: no write is long enough, and never more than
///   half of it is queued, so no push is forced, however the data was written;
/// - the first flight goes under the SYN-ACK's unscaled window (65,535: half of it
///   is 32,767), its forced pushes counted back from the end of what was queued
///   before the handshake, the whole first fill (the file or the send buffer) or
///   [`LAZY_START`]: the same when that first fill is no more than `LAZY_START`
///   (written whole either way) or, as `LAZY_START`, a whole number *m* of 32 KiB
///   below 32 MiB (counted back, *m* bytes from the start: in the first segment).
fn lazy_keeps_the_wire(bytes: u64, record: usize, send_buffer: usize, recv_buffer: usize) -> bool {
    let first_fill = bytes.min(send_buffer as u64);
    2 * send_buffer.max(record) <= recv_buffer
        && (first_fill <= LAZY_START
            || (first_fill.is_multiple_of(32 << 10) && first_fill < 32 << 20))
}

/// How many bytes the bulk sender writes now (`made` so far), where it writes the
/// file as TCP can take it rather than filling the send buffer at once: the same
/// segments go out, the pattern is made only for what is sent (a flow sends a few
/// MB in a run whose send buffers hold 2 MB each).
///
/// TCP never waits for data the eager sender would have had queued: the new data it
/// sends before the application next runs (after any frame or timer at either host)
/// is within the congestion window then, at most today's plus the bytes acknowledged
/// meanwhile, themselves at most what is in flight; so the sender keeps at least
/// `cwnd + max(cwnd, in flight)` and [`LAZY_MARGIN`] unsent (or, capped by the send
/// buffer, all it holds, as the eager sender). No segment so ends the queued data
/// early (the one that does carries PSH). With no sending half (before the handshake
/// is done, or after an error) it writes up to [`LAZY_START`] in all; past that, the
/// connection's error is the one a write would have returned. Ok(None): nothing to
/// write now.
fn lazy_room(stack: &Stack, client: TcpHandle, made: u64) -> Result<Option<usize>, TcpError> {
    match stack.tcp_send_progress(client) {
        Some(p) => {
            let in_flight = p.queued - p.unsent;
            let need = p.cwnd + p.cwnd.max(in_flight) + LAZY_MARGIN;
            Ok((p.unsent < need).then(|| need + LAZY_MARGIN - p.unsent))
        }
        None if made < LAZY_START => Ok(Some((LAZY_START - made) as usize)),
        None => match stack.tcp_error(client) {
            Ok(None) => Ok(None),
            Ok(Some(e)) | Err(e) => Err(e),
        },
    }
}

/// The bulk receiver: read (paying CPU time per byte) and check what it read against the
/// stream (text mode: translate back and hash); close at the end of the stream. Returns when the receiver is next free, if it is busy now.
fn bulk_receive(
    s: &mut BulkApp,
    stack: &mut Stack,
    now: Instant,
    server: TcpHandle,
    file: &BulkFile,
) -> Result<Option<Instant>, String> {
    let chunk = if file.per_byte > Duration::ZERO || file.record_reads {
        file.record.min(s.buf.len())
    } else {
        s.buf.len()
    };
    while !s.eof {
        if now < s.receiver_busy_until {
            return Ok(Some(s.receiver_busy_until));
        }
        let mut buf = std::mem::take(&mut s.buf);
        // Binary mode checks the bytes where the stack keeps them (the same read,
        // without the copy into `buf`); text mode translates them in `buf`.
        let read = if file.text_mode {
            stack.tcp_recv(now, server, &mut buf[..chunk])
        } else {
            let check = &mut s.check;
            stack.tcp_recv_each(now, server, chunk, |piece| check.update(piece))
        };
        let result = match read {
            Ok(0) => {
                if s.pending_cr {
                    s.received_hash.update(b"\r");
                    s.pending_cr = false;
                }
                s.eof = true;
                stack
                    .tcp_close(now, server)
                    .map_err(|e| tcp_err("close", e))
            }
            Ok(n) => {
                s.read_bytes += n as u64;
                if file.text_mode {
                    receive_text(s, &buf[..n]);
                }
                s.receiver_busy_until = now + file.per_byte.saturating_mul(n as u64);
                Ok(())
            }
            Err(TcpError::WouldBlock) => {
                s.buf = buf;
                break;
            }
            Err(e) => Err(tcp_err("recv", e)),
        };
        s.buf = buf;
        result?;
    }
    Ok(None)
}

/// FTP ASCII mode back to the file's form: CRLF becomes LF (a CR at the end of `data`
/// waits for the next read).
fn receive_text(s: &mut BulkApp, data: &[u8]) {
    let mut out = Vec::with_capacity(data.len());
    for &b in data {
        if s.pending_cr {
            s.pending_cr = false;
            if b != b'\n' {
                out.push(b'\r');
            }
        }
        if b == b'\r' {
            s.pending_cr = true;
        } else {
            out.push(b);
        }
    }
    s.received_hash.update(&out);
}

/// The request/response server: accept, read requests, owe a response for each
/// complete one, write what is owed.
fn rr_serve(
    s: &mut RrApp,
    stack: &mut Stack,
    now: Instant,
    request: usize,
    response: usize,
) -> Step {
    if s.server.is_none() {
        match stack.tcp_accept(s.listener.ok_or("no listener")?) {
            Ok(c) => s.server = Some(c),
            Err(TcpError::WouldBlock) => {}
            Err(e) => return Err(tcp_err("accept", e)),
        }
    }
    let Some(server) = s.server else {
        return Ok(());
    };
    while !s.server_closed {
        match stack.tcp_recv(now, server, &mut s.buf) {
            Ok(0) => {
                s.server_closed = true;
                stack
                    .tcp_close(now, server)
                    .map_err(|e| tcp_err("close", e))?;
            }
            Ok(n) => {
                s.bytes += n as u64;
                s.request_got += n;
                s.server_owed += s.request_got / request * response;
                s.request_got %= request;
                continue;
            }
            Err(TcpError::WouldBlock) => {}
            Err(e) => return Err(tcp_err("recv", e)),
        }
        break;
    }
    Ok(())
}

/// The request/response server's writes: what it owes, each response written as
/// `write` says. A response that starts with a head written on its own is handed to
/// the wire before the rest is written, as a runtime does after every socket call.
fn rr_respond(
    s: &mut RrApp,
    sim: &mut Sim,
    host: HostId,
    now: Instant,
    response: usize,
    write: ResponseWrite,
) -> Step {
    let Some(server) = s.server else {
        return Ok(());
    };
    while s.server_owed > 0 && !s.server_closed {
        // Bytes of the current response still to write (a whole response at its start).
        let left = match s.server_owed % response {
            0 => response,
            n => n,
        };
        let stack = sim.host_mut(host);
        let written = match write {
            // As many whole or partial responses as the payload holds, in one write.
            ResponseWrite::One => {
                let n = s.server_owed.min(s.payload.len());
                stack.tcp_send(now, server, &s.payload[..n])
            }
            ResponseWrite::Gather { head } if left == response => stack.tcp_send_vectored(
                now,
                server,
                [&s.payload[..head], &s.payload[head..response]],
            ),
            ResponseWrite::Two { head } | ResponseWrite::Corked { head } if left == response => {
                if matches!(write, ResponseWrite::Corked { .. }) {
                    stack
                        .tcp_set_cork(now, server, true)
                        .map_err(|e| tcp_err("cork", e))?;
                }
                let written = stack.tcp_send(now, server, &s.payload[..head]);
                sim.transmit_now().map_err(|e| e.to_string())?;
                written
            }
            _ => stack.tcp_send(now, server, &s.payload[..left]),
        };
        match written {
            Ok(0) | Err(TcpError::WouldBlock) => break,
            Ok(n) => s.server_owed -= n,
            Err(e) => return Err(tcp_err("send", e)),
        }
        if s.server_owed.is_multiple_of(response) && matches!(write, ResponseWrite::Corked { .. }) {
            sim.host_mut(host)
                .tcp_set_cork(now, server, false)
                .map_err(|e| tcp_err("uncork", e))?;
        }
    }
    Ok(())
}

/// The request/response client's read: count complete responses and their latency.
/// Returns whether anything arrived.
fn rr_collect(
    s: &mut RrApp,
    stack: &mut Stack,
    now: Instant,
    client: TcpHandle,
    response: usize,
) -> Result<bool, String> {
    match stack.tcp_recv(now, client, &mut s.buf) {
        Ok(0) => Ok(false),
        Ok(n) => {
            s.bytes += n as u64;
            s.response_got += n;
            while s.response_got >= response {
                s.response_got -= response;
                s.completed += 1;
                if let Some(issued) = s.outstanding.pop_front() {
                    s.latencies_ms.push((now - issued).as_secs_f64() * 1e3);
                }
            }
            Ok(true)
        }
        Err(TcpError::WouldBlock) => Ok(false),
        Err(e) => Err(tcp_err("recv", e)),
    }
}
