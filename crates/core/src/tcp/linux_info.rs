//! Linux's `struct tcp_info`, filled from imp's [`TcpInfo`]: what `getsockopt(TCP_INFO)`
//! returns in the programs that run on imp (the packetdrill shim, the preload library).
//! Pure data: the counts and times come in, bytes go out.

use alloc::vec::Vec;

use super::{TcpInfo, TcpState};

/// Linux's `struct tcp_info` (`include/uapi/linux/tcp.h`, as of Linux 6.18 with the
/// Accurate ECN counters: 280 bytes), field for field. Older readers ask for less and
/// get the prefix they know, as from the kernel. The bit
/// fields are whole bytes here: `wscales` holds `tcpi_snd_wscale:4` in its low and
/// `tcpi_rcv_wscale:4` in its high nibble (GCC's order on little-endian machines).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct LinuxTcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscales: u8,
    pub app_limited: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub rehash: u32,
    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    pub total_rto_time: u32,
    pub received_ce: u32,
    pub delivered_e1_bytes: u32,
    pub delivered_e0_bytes: u32,
    pub delivered_ce_bytes: u32,
    pub received_e1_bytes: u32,
    pub received_e0_bytes: u32,
    pub received_ce_bytes: u32,
    /// `tcpi_ecn_mode:2, tcpi_accecn_opt_seen:2, tcpi_accecn_fail_mode:4,
    /// tcpi_options2:24`.
    pub ecn_bits: u32,
}

/// Linux's `TCP_INFINITE_SSTHRESH`.
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Linux's number for a TCP state (`include/net/tcp_states.h`).
pub fn linux_state(state: TcpState) -> u8 {
    match state {
        TcpState::Established => 1,
        TcpState::SynSent => 2,
        TcpState::SynReceived => 3,
        TcpState::FinWait1 => 4,
        TcpState::FinWait2 => 5,
        TcpState::TimeWait => 6,
        TcpState::Closed => 7,
        TcpState::CloseWait => 8,
        TcpState::LastAck => 9,
        TcpState::Listen => 10,
        TcpState::Closing => 11,
    }
}

impl LinuxTcpInfo {
    /// Linux's view of `info` on a link of `mtu` bytes: counts in segments where Linux
    /// counts segments, times in microseconds.
    pub fn from_info(info: &TcpInfo, mtu: u32) -> LinuxTcpInfo {
        let mss = u32::from(info.snd_mss).max(1);
        let segments = |bytes: u32| bytes.div_ceil(mss);
        let micros = |d: crate::time::Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
        let mut options = 0;
        if info.timestamps {
            options |= 1;
        }
        if info.sack {
            options |= 2;
        }
        let mut wscales = 0;
        if let Some((ours, peers)) = info.wscale {
            options |= 4;
            wscales = (peers & 0xf) | (ours & 0xf) << 4;
        }
        if info.ecn {
            options |= 8;
        }
        // TCPI_OPT_SYN_DATA: the SYN's data (Fast Open) was acknowledged.
        if info.syn_data_acked {
            options |= 0x20;
        }
        LinuxTcpInfo {
            state: linux_state(info.state),
            // Linux's TCP_CA_Recovery (3), else TCP_CA_Disorder (1) while SACKed data
            // sit above SND.UNA (`tcp_try_to_open`: "tcp_left_out(tp)"), else Open.
            ca_state: if info.in_recovery {
                3
            } else if info.sacked > 0 {
                1
            } else {
                0
            },
            options,
            wscales,
            rto: micros(info.rto),
            ato: 40_000,
            snd_mss: mss,
            rcv_mss: mss,
            unacked: segments(info.bytes_in_flight),
            sacked: segments(info.sacked),
            total_retrans: u32::try_from(info.retransmits).unwrap_or(u32::MAX),
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
            // Linux's tp->reordering: the sysctl's 3 segments, raised to the extent of
            // the reordering seen (`tcp_check_sack_reordering`).
            reordering: 3.max(info.reordering.div_ceil(mss)),
            lost: segments(info.lost),
            reord_seen: info.reord_seen,
            notsent_bytes: info.bytes_queued.saturating_sub(info.bytes_in_flight),
            snd_wnd: info.snd_wnd,
            rcv_wnd: info.rcv_wnd,
            delivered: info.delivered,
            pacing_rate: info.pacing_rate.unwrap_or(0),
            ..LinuxTcpInfo::default()
        }
    }

    /// A socket with no connection: all zero but the state.
    pub fn of_state(state: TcpState) -> LinuxTcpInfo {
        LinuxTcpInfo {
            state: linux_state(state),
            ..LinuxTcpInfo::default()
        }
    }

    /// The struct's bytes, as the kernel copies them out (native byte order; the
    /// fields are laid out without padding, so they follow one another).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(core::mem::size_of::<LinuxTcpInfo>());
        out.extend_from_slice(&self.state.to_ne_bytes());
        out.extend_from_slice(&self.ca_state.to_ne_bytes());
        out.extend_from_slice(&self.retransmits.to_ne_bytes());
        out.extend_from_slice(&self.probes.to_ne_bytes());
        out.extend_from_slice(&self.backoff.to_ne_bytes());
        out.extend_from_slice(&self.options.to_ne_bytes());
        out.extend_from_slice(&self.wscales.to_ne_bytes());
        out.extend_from_slice(&self.app_limited.to_ne_bytes());
        out.extend_from_slice(&self.rto.to_ne_bytes());
        out.extend_from_slice(&self.ato.to_ne_bytes());
        out.extend_from_slice(&self.snd_mss.to_ne_bytes());
        out.extend_from_slice(&self.rcv_mss.to_ne_bytes());
        out.extend_from_slice(&self.unacked.to_ne_bytes());
        out.extend_from_slice(&self.sacked.to_ne_bytes());
        out.extend_from_slice(&self.lost.to_ne_bytes());
        out.extend_from_slice(&self.retrans.to_ne_bytes());
        out.extend_from_slice(&self.fackets.to_ne_bytes());
        out.extend_from_slice(&self.last_data_sent.to_ne_bytes());
        out.extend_from_slice(&self.last_ack_sent.to_ne_bytes());
        out.extend_from_slice(&self.last_data_recv.to_ne_bytes());
        out.extend_from_slice(&self.last_ack_recv.to_ne_bytes());
        out.extend_from_slice(&self.pmtu.to_ne_bytes());
        out.extend_from_slice(&self.rcv_ssthresh.to_ne_bytes());
        out.extend_from_slice(&self.rtt.to_ne_bytes());
        out.extend_from_slice(&self.rttvar.to_ne_bytes());
        out.extend_from_slice(&self.snd_ssthresh.to_ne_bytes());
        out.extend_from_slice(&self.snd_cwnd.to_ne_bytes());
        out.extend_from_slice(&self.advmss.to_ne_bytes());
        out.extend_from_slice(&self.reordering.to_ne_bytes());
        out.extend_from_slice(&self.rcv_rtt.to_ne_bytes());
        out.extend_from_slice(&self.rcv_space.to_ne_bytes());
        out.extend_from_slice(&self.total_retrans.to_ne_bytes());
        out.extend_from_slice(&self.pacing_rate.to_ne_bytes());
        out.extend_from_slice(&self.max_pacing_rate.to_ne_bytes());
        out.extend_from_slice(&self.bytes_acked.to_ne_bytes());
        out.extend_from_slice(&self.bytes_received.to_ne_bytes());
        out.extend_from_slice(&self.segs_out.to_ne_bytes());
        out.extend_from_slice(&self.segs_in.to_ne_bytes());
        out.extend_from_slice(&self.notsent_bytes.to_ne_bytes());
        out.extend_from_slice(&self.min_rtt.to_ne_bytes());
        out.extend_from_slice(&self.data_segs_in.to_ne_bytes());
        out.extend_from_slice(&self.data_segs_out.to_ne_bytes());
        out.extend_from_slice(&self.delivery_rate.to_ne_bytes());
        out.extend_from_slice(&self.busy_time.to_ne_bytes());
        out.extend_from_slice(&self.rwnd_limited.to_ne_bytes());
        out.extend_from_slice(&self.sndbuf_limited.to_ne_bytes());
        out.extend_from_slice(&self.delivered.to_ne_bytes());
        out.extend_from_slice(&self.delivered_ce.to_ne_bytes());
        out.extend_from_slice(&self.bytes_sent.to_ne_bytes());
        out.extend_from_slice(&self.bytes_retrans.to_ne_bytes());
        out.extend_from_slice(&self.dsack_dups.to_ne_bytes());
        out.extend_from_slice(&self.reord_seen.to_ne_bytes());
        out.extend_from_slice(&self.rcv_ooopack.to_ne_bytes());
        out.extend_from_slice(&self.snd_wnd.to_ne_bytes());
        out.extend_from_slice(&self.rcv_wnd.to_ne_bytes());
        out.extend_from_slice(&self.rehash.to_ne_bytes());
        out.extend_from_slice(&self.total_rto.to_ne_bytes());
        out.extend_from_slice(&self.total_rto_recoveries.to_ne_bytes());
        out.extend_from_slice(&self.total_rto_time.to_ne_bytes());
        out.extend_from_slice(&self.received_ce.to_ne_bytes());
        out.extend_from_slice(&self.delivered_e1_bytes.to_ne_bytes());
        out.extend_from_slice(&self.delivered_e0_bytes.to_ne_bytes());
        out.extend_from_slice(&self.delivered_ce_bytes.to_ne_bytes());
        out.extend_from_slice(&self.received_e1_bytes.to_ne_bytes());
        out.extend_from_slice(&self.received_e0_bytes.to_ne_bytes());
        out.extend_from_slice(&self.received_ce_bytes.to_ne_bytes());
        out.extend_from_slice(&self.ecn_bits.to_ne_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// Offsets of Linux's `struct tcp_info` on x86_64 (as packetdrill's copy in `tcp.h`
    /// lays it out), and the bytes at them.
    #[test]
    fn layout_and_bytes_match_linux() {
        assert_eq!(offset_of!(LinuxTcpInfo, rto), 8);
        assert_eq!(offset_of!(LinuxTcpInfo, snd_mss), 16);
        assert_eq!(offset_of!(LinuxTcpInfo, last_data_recv), 52);
        assert_eq!(offset_of!(LinuxTcpInfo, rtt), 68);
        assert_eq!(offset_of!(LinuxTcpInfo, snd_cwnd), 80);
        assert_eq!(offset_of!(LinuxTcpInfo, total_retrans), 100);
        assert_eq!(offset_of!(LinuxTcpInfo, pacing_rate), 104);
        assert_eq!(offset_of!(LinuxTcpInfo, segs_out), 136);
        assert_eq!(offset_of!(LinuxTcpInfo, delivery_rate), 160);
        assert_eq!(offset_of!(LinuxTcpInfo, delivered), 192);
        assert_eq!(offset_of!(LinuxTcpInfo, snd_wnd), 228);
        assert_eq!(offset_of!(LinuxTcpInfo, total_rto), 240);
        assert_eq!(offset_of!(LinuxTcpInfo, received_ce), 248);
        assert_eq!(size_of::<LinuxTcpInfo>(), 280);
        let info = LinuxTcpInfo {
            total_retrans: 0x0102_0304,
            pacing_rate: 0x1122_3344_5566_7788,
            snd_wnd: 7,
            total_rto: 0x0a0b,
            ecn_bits: 9,
            ..LinuxTcpInfo::of_state(TcpState::Listen)
        };
        let bytes = info.to_bytes();
        assert_eq!(bytes.len(), 280);
        assert_eq!(bytes[0], 10, "TCP_LISTEN");
        assert_eq!(bytes[100..104], 0x0102_0304u32.to_ne_bytes());
        assert_eq!(bytes[104..112], 0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(bytes[228..232], 7u32.to_ne_bytes());
        assert_eq!(bytes[240..242], 0x0a0bu16.to_ne_bytes());
        assert_eq!(bytes[276..280], 9u32.to_ne_bytes());
    }
}
