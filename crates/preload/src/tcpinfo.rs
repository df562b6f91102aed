//! `TCP_INFO`: the prefix of Linux's `struct tcp_info` (`include/uapi/linux/tcp.h`) up
//! to `tcpi_min_rtt`, filled from imp's [`TcpInfo`]. A reader asking for more gets
//! this much, and the length says so, as from an older kernel.

use impnet::core::tcp::{TcpInfo, TcpState};

/// Linux's `struct tcp_info`, its first 40 fields. The bit fields are whole bytes:
/// `wscales` holds `tcpi_snd_wscale:4` low and `tcpi_rcv_wscale:4` high.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct LinuxTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscales: u8,
    app_limited: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    /// `tcpi_min_rtt`, left 0; here so that the struct has no tail padding (whose
    /// bytes would be copied out uninitialised).
    min_rtt: u32,
}

/// Linux's `TCP_INFINITE_SSTHRESH`.
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Linux's `tcpi_state` numbers (`include/net/tcp_states.h`).
fn linux_state(state: TcpState) -> u8 {
    match state {
        TcpState::Established => 1,
        TcpState::SynSent => 2,
        TcpState::SynReceived => 3,
        TcpState::FinWait1 => 4,
        TcpState::FinWait2 => 5,
        TcpState::TimeWait => 6,
        TcpState::CloseWait => 8,
        TcpState::LastAck => 9,
        TcpState::Listen => 10,
        TcpState::Closing => 11,
        TcpState::Closed => 7,
    }
}

/// The bytes of Linux's `struct tcp_info` for `info` (None: a socket with no
/// connection, all zero but the state, `state`).
pub(crate) fn bytes(info: Option<&TcpInfo>, state: TcpState, mtu: u32) -> Vec<u8> {
    let linux = info.map_or(
        LinuxTcpInfo {
            state: linux_state(state),
            ..LinuxTcpInfo::default()
        },
        |info| from_info(info, mtu),
    );
    let size = size_of::<LinuxTcpInfo>();
    let mut out = vec![0u8; size];
    // SAFETY: LinuxTcpInfo is repr(C), Copy, made of integers and without padding
    // (the test checks its size); `out` holds `size` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(
            std::ptr::from_ref(&linux).cast::<u8>(),
            out.as_mut_ptr(),
            size,
        );
    }
    out
}

fn from_info(info: &TcpInfo, mtu: u32) -> LinuxTcpInfo {
    let mss = u32::from(info.snd_mss).max(1);
    let segments = |bytes: u32| bytes.div_ceil(mss);
    let micros = |d: impnet::core::Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
    // TCPI_OPT_TIMESTAMPS, _SACK, _WSCALE, _ECN.
    let mut options = u8::from(info.timestamps) | u8::from(info.sack) << 1;
    let mut wscales = 0;
    if let Some((ours, peers)) = info.wscale {
        options |= 4;
        wscales = (peers & 0xf) | (ours & 0xf) << 4;
    }
    options |= u8::from(info.ecn) << 3;
    LinuxTcpInfo {
        state: linux_state(info.state),
        ca_state: if info.in_recovery { 3 } else { 0 },
        options,
        wscales,
        rto: micros(info.rto),
        ato: 40_000,
        snd_mss: mss,
        rcv_mss: mss,
        unacked: segments(info.bytes_in_flight),
        sacked: segments(info.sacked),
        lost: segments(info.lost),
        pmtu: info.path_mtu.map_or(mtu, u32::from),
        rtt: info.srtt.map_or(0, micros),
        rttvar: micros(info.rttvar),
        snd_ssthresh: if info.ssthresh >= INFINITE_SSTHRESH {
            INFINITE_SSTHRESH
        } else {
            info.ssthresh / mss
        },
        snd_cwnd: info.cwnd / mss,
        advmss: mss,
        reordering: 3.max(info.reordering.div_ceil(mss)),
        total_retrans: u32::try_from(info.retransmits).unwrap_or(u32::MAX),
        pacing_rate: info.pacing_rate.unwrap_or(0),
        notsent_bytes: info.bytes_queued.saturating_sub(info.bytes_in_flight),
        ..LinuxTcpInfo::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_matches_linux_up_to_notsent_bytes() {
        // offsetof(struct tcp_info, tcpi_total_retrans) is 100, tcpi_pacing_rate 104,
        // tcpi_notsent_bytes 144 (Linux's uapi header on x86_64).
        assert_eq!(std::mem::offset_of!(LinuxTcpInfo, total_retrans), 100);
        assert_eq!(std::mem::offset_of!(LinuxTcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(LinuxTcpInfo, notsent_bytes), 144);
        assert_eq!(size_of::<LinuxTcpInfo>(), 152, "no padding");
        let bytes = bytes(None, TcpState::Listen, 1500);
        assert_eq!(bytes[0], 10, "TCP_LISTEN");
        assert!(bytes[1..].iter().all(|b| *b == 0));
    }
}
