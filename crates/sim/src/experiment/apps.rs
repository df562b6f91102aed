//! The applications at both ends of each flow: a ttcp-style bulk sender and sink (with
//! an optional FTP text-mode translation and a CPU cost per byte), a request/response
//! client and server, and ping.

use impnet_core::tcp::TcpError;
use impnet_core::{Duration, IcmpError, Instant};

use super::{App, AppState, Step, tcp_err};
use crate::HostId;
use crate::Sim;
use crate::scenario::FlowKind;

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
        let per_byte = if text_mode {
            cpu_per_byte + translate_per_byte
        } else {
            cpu_per_byte
        };
        let mut wake: Option<Instant> = None;
        // The sender: prepare a record (paying its CPU time), then write it.
        let client = s.client.ok_or("no connection")?;
        let stack = sim.host_mut(from);
        while !s.closed {
            if s.offset < s.out.len() {
                if now < s.sender_busy_until {
                    wake = Some(s.sender_busy_until);
                    break;
                }
                match stack.tcp_send(now, client, &s.out[s.offset..]) {
                    Ok(0) | Err(TcpError::WouldBlock) => break,
                    Ok(n) => s.offset += n,
                    Err(e) => return Err(tcp_err("send", e)),
                }
                continue;
            }
            if s.written >= bytes {
                stack
                    .tcp_close(now, client)
                    .map_err(|e| tcp_err("close", e))?;
                s.closed = true;
                break;
            }
            let n = (bytes - s.written).min(record as u64) as usize;
            let mut raw = std::mem::take(&mut s.buf);
            raw.resize(raw.len().max(n), 0);
            s.text.fill(&mut raw[..n]);
            s.sent_hash.update(&raw[..n]);
            s.written += n as u64;
            s.out.clear();
            if text_mode {
                // FTP ASCII mode: the network form of a newline is CRLF (RFC 959).
                for &b in &raw[..n] {
                    if b == b'\n' {
                        s.out.push(b'\r');
                    }
                    s.out.push(b);
                }
            } else {
                s.out.extend_from_slice(&raw[..n]);
            }
            s.buf = raw;
            s.offset = 0;
            s.sender_busy_until = now.max(s.sender_busy_until) + per_byte.saturating_mul(n as u64);
        }
        // The receiver: read (paying CPU time per byte), translate back, hash.
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
        let chunk = if per_byte > Duration::ZERO {
            record.min(s.buf.len())
        } else {
            s.buf.len()
        };
        while !s.eof {
            if now < s.receiver_busy_until {
                wake = Some(wake.map_or(s.receiver_busy_until, |w| w.min(s.receiver_busy_until)));
                break;
            }
            let mut buf = std::mem::take(&mut s.buf);
            let read = stack.tcp_recv(now, server, &mut buf[..chunk]);
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
                    if text_mode {
                        let mut out = Vec::with_capacity(n);
                        for &b in &buf[..n] {
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
                    } else {
                        s.received_hash.update(&buf[..n]);
                    }
                    s.receiver_busy_until = now + per_byte.saturating_mul(n as u64);
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
        } = self.spec.kind.clone()
        else {
            return Ok(());
        };
        let AppState::Rr(s) = &mut self.state else {
            return Ok(());
        };
        let client = s.client.ok_or("no connection")?;
        // The server: read requests, owe a response for each complete one, write.
        let server_stack = sim.host_mut(to);
        if s.server.is_none() {
            match server_stack.tcp_accept(s.listener.ok_or("no listener")?) {
                Ok(c) => s.server = Some(c),
                Err(TcpError::WouldBlock) => {}
                Err(e) => return Err(tcp_err("accept", e)),
            }
        }
        if let Some(server) = s.server {
            loop {
                if !s.server_closed {
                    match server_stack.tcp_recv(now, server, &mut s.buf) {
                        Ok(0) => {
                            s.server_closed = true;
                            server_stack
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
                }
                break;
            }
            while s.server_owed > 0 && !s.server_closed {
                let n = s.server_owed.min(s.payload.len());
                match server_stack.tcp_send(now, server, &s.payload[..n]) {
                    Ok(0) | Err(TcpError::WouldBlock) => break,
                    Ok(n) => s.server_owed -= n,
                    Err(e) => return Err(tcp_err("send", e)),
                }
            }
        }
        // The client: keep `pipeline` requests outstanding, collect responses.
        let stack = sim.host_mut(from);
        loop {
            let mut progressed = false;
            while !s.closed
                && count.is_none_or(|c| s.issued < c)
                && s.outstanding.len() < pipeline as usize
            {
                s.outstanding.push_back(now);
                s.issued += 1;
                s.client_owed += request;
            }
            while s.client_owed > 0 {
                let n = s.client_owed.min(s.payload.len());
                match stack.tcp_send(now, client, &s.payload[..n]) {
                    Ok(0) | Err(TcpError::WouldBlock) => break,
                    Ok(n) => s.client_owed -= n,
                    Err(e) => return Err(tcp_err("send", e)),
                }
            }
            match stack.tcp_recv(now, client, &mut s.buf) {
                Ok(0) => {}
                Ok(n) => {
                    progressed = true;
                    s.bytes += n as u64;
                    s.response_got += n;
                    while s.response_got >= response {
                        s.response_got -= response;
                        s.completed += 1;
                        if let Some(issued) = s.outstanding.pop_front() {
                            s.latencies_ms.push((now - issued).as_secs_f64() * 1e3);
                        }
                    }
                }
                Err(TcpError::WouldBlock) => {}
                Err(e) => return Err(tcp_err("recv", e)),
            }
            if !progressed {
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
