//! Per-socket settings through the sockets (std-like and tokio), over an in-memory
//! pipe between two runtimes: a listener's congestion controller is its accepted
//! connections', and a connection may change its own.

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::time::Duration;

use impnet::core::tcp::cc::CcAlgorithm;
use impnet::core::{IfaceConfig, Secret, StackConfig};
use impnet::phy::pipe;
use impnet::wire::{ethernet, ipv4::Cidr};
use impnet::{Runtime, TcpListener, TcpStream};

fn pair() -> (Runtime, Runtime) {
    let (a_end, b_end) = pipe(1514);
    let make = |end, last: u8, seed| {
        let rt = Runtime::with_secret(StackConfig::default(), Secret::from_bytes([seed; 16]))
            .expect("runtime");
        let mac = ethernet::Address([0x02, 0, 0, 0, 0, last]);
        let iface = rt.add_device(end, IfaceConfig::new(mac, 1500));
        rt.add_address(
            iface,
            Cidr {
                address: Ipv4Addr::new(192, 0, 2, last),
                prefix_len: 24,
            },
        );
        rt
    };
    (make(a_end, 1, 1), make(b_end, 2, 2))
}

#[test]
fn congestion_control_per_socket_over_a_pipe() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, "192.0.2.2:81").unwrap();
    listener.set_congestion(CcAlgorithm::Cubic).unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let name = stream.congestion().unwrap();
        let mut request = [0u8; 4];
        stream.read_exact(&mut request).unwrap();
        stream.write_all(&request).unwrap();
        name
    });
    let mut client = TcpStream::connect(&a, "192.0.2.2:81").unwrap();
    assert_eq!(client.congestion().unwrap(), "newreno");
    client.set_congestion(CcAlgorithm::Bbr).unwrap();
    client
        .set_user_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(client.congestion().unwrap(), "bbr");
    client.write_all(b"ping").unwrap();
    let mut echo = [0u8; 4];
    client.read_exact(&mut echo).unwrap();
    assert_eq!(&echo, b"ping");
    assert_eq!(server.join().unwrap(), "cubic");
}

#[cfg(feature = "tokio")]
#[test]
fn async_congestion_control_per_socket_over_a_pipe() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (a, b) = pair();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = impnet::tokio::TcpListener::bind(&b, "192.0.2.2:81").unwrap();
        listener.set_congestion(CcAlgorithm::Vegas).unwrap();
        let server = async {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4];
            stream.read_exact(&mut request).await.unwrap();
            stream.write_all(&request).await.unwrap();
            stream.congestion().unwrap()
        };
        let client = async {
            let mut stream = impnet::tokio::TcpStream::connect(&a, "192.0.2.2:81")
                .await
                .unwrap();
            stream.set_congestion(CcAlgorithm::Cubic).unwrap();
            stream.write_all(b"pong").await.unwrap();
            let mut echo = [0u8; 4];
            stream.read_exact(&mut echo).await.unwrap();
            assert_eq!(&echo, b"pong");
            stream.congestion().unwrap()
        };
        let (server, client) = tokio::time::timeout(Duration::from_secs(30), async {
            tokio::join!(server, client)
        })
        .await
        .expect("exchange timed out");
        assert_eq!(server, "vegas");
        assert_eq!(client, "cubic");
    });
}
