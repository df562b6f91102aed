//! `TCP_INFO`: Linux's `struct tcp_info` (`include/uapi/linux/tcp.h`, 280 bytes as of
//! Linux 6.18), filled from imp's [`TcpInfo`] by the core's [`LinuxTcpInfo`]. A reader
//! asking for less gets the prefix it knows, as from the kernel.

use impnet::core::tcp::{LinuxTcpInfo, TcpInfo, TcpState};

/// The bytes of Linux's `struct tcp_info` for `info` on a link of `mtu` bytes (None: a
/// socket with no connection, all zero but the state, `state`).
pub(crate) fn bytes(info: Option<&TcpInfo>, state: TcpState, mtu: u32) -> Vec<u8> {
    info.map_or_else(
        || LinuxTcpInfo::of_state(state),
        |info| LinuxTcpInfo::from_info(info, mtu),
    )
    .to_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_without_a_connection_reports_its_state_alone() {
        let bytes = bytes(None, TcpState::Listen, 1500);
        assert_eq!(bytes.len(), 280);
        assert_eq!(bytes[0], 10, "TCP_LISTEN");
        assert!(bytes[1..].iter().all(|b| *b == 0));
    }
}
