//! Sockets for the tasks of a simulated host, shaped like `tokio::net`'s: swap the
//! import (`use impnet_sim_tokio::net::{TcpListener, TcpStream};`) and the code runs on
//! the host's imp stack in the simulator. A string address may name a simulated host
//! (`TcpStream::connect("server:9999")`, [`lookup`]).

mod addr;
mod tcp;
mod udp;

pub use addr::{ToSocketAddrs, lookup};
pub use tcp::{OwnedReadHalf, OwnedWriteHalf, ReuniteError, TcpListener, TcpStream};
pub use udp::UdpSocket;
